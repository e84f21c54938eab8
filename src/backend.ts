/**
 * Which llama.cpp backend the runners will use, told once at start (daemon side: node-llama-cpp is
 * imported only in runner processes, so a native crash never takes the daemon down).
 *
 * The GPU binaries are node-llama-cpp's prebuilt packages (`@node-llama-cpp/linux-x64-cuda` with
 * its `-ext` part, `@node-llama-cpp/linux-x64-vulkan`); the `lmd-cuda` and `lmd-vulkan` system
 * packages install them under /usr/lib/lmd/gpu/<backend>/ and link them into the node_modules where
 * node-llama-cpp looks them up. Most reasons a GPU goes unused can be read from the file system
 * at no cost (the binaries are for another node-llama-cpp, the driver or the Vulkan loader is
 * missing, no device node). Only when a backend could work does a probe process (runner/probe.ts)
 * open node-llama-cpp as a runner would, and say which backend it got and why the others failed;
 * with a GPU backend it also decodes a few tokens of a tiny model (its smoke test). A backend that
 * opens and fails that test (prebuilt CUDA binaries newer than the driver abort the process at the
 * first decode) is broken: with SERVICE_GPU=auto the runners then use the CPU ({@link runnerGpu}),
 * with SERVICE_GPU=cuda or vulkan model loads are refused with the reason.
 *
 * Binaries an lmd GPU package installed (found through its link) that go unused are a warning: an
 * operator installed them to use a GPU. Those npm put into a checkout's node_modules (node-llama-cpp's
 * optional dependencies) are only mentioned.
 */
import { fork } from "node:child_process";
import { existsSync, lstatSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import type { Logger } from "pino";
import type { GpuMode } from "./config.js";
import type { RunnerGpu } from "./runner/types.js";
import { childEntry, runnerEnv } from "./runner/spawn.js";
import type { ProbeResult } from "./runner/probe.js";
import { formatBytes } from "./units.js";

export type GpuBackend = "cuda" | "vulkan";

/** node-llama-cpp's prebuilt packages per backend (the first one holds the addon). */
export const GPU_PACKAGES: Readonly<Record<GpuBackend, readonly string[]>> = {
  cuda: ["@node-llama-cpp/linux-x64-cuda", "@node-llama-cpp/linux-x64-cuda-ext"],
  vulkan: ["@node-llama-cpp/linux-x64-vulkan"],
};

/** The lmd system package that carries each backend. */
export const SYSTEM_PACKAGE: Readonly<Record<GpuBackend, string>> = { cuda: "lmd-cuda", vulkan: "lmd-vulkan" };

/** A backend's binaries, as found next to node-llama-cpp. */
export interface InstalledBackend {
  backend: GpuBackend;
  /** The version of its main package (node-llama-cpp uses it only when it equals its own). */
  version: string;
  /** Installed by an lmd GPU package: a link to /usr/lib/lmd/gpu/<backend>/. */
  packaged: boolean;
}

/** What the host offers, as far as files tell. */
export interface HostFacts {
  /** A shared library is on the dynamic linker's path (ld.so.cache, LD_LIBRARY_PATH, the usual directories). */
  hasLibrary(name: string): boolean;
  /** A device node exists. */
  hasDevice(file: string): boolean;
}

/** The backends whose binaries are installed, and node-llama-cpp's version. */
export function installedBackends(nodeModules = nodeModulesDir()): { llamaVersion: string; installed: InstalledBackend[] } {
  const llamaVersion = readVersion(path.join(nodeModules, "node-llama-cpp")) ?? "unknown";
  const installed: InstalledBackend[] = [];
  for (const backend of Object.keys(GPU_PACKAGES) as GpuBackend[]) {
    const dir = path.join(nodeModules, GPU_PACKAGES[backend][0]!);
    const version = readVersion(dir);
    if (version === undefined) continue;
    let packaged = false;
    try {
      packaged = lstatSync(dir).isSymbolicLink();
    } catch {
      // read above, so it exists; a race with an uninstall leaves it unpackaged
    }
    installed.push({ backend, version, packaged });
  }
  return { llamaVersion, installed };
}

/** The node_modules directory node-llama-cpp is in (where it resolves its prebuilt packages from). */
export function nodeModulesDir(): string {
  const main = createRequire(import.meta.url).resolve("node-llama-cpp");
  const marker = `${path.sep}node_modules${path.sep}node-llama-cpp${path.sep}`;
  const at = main.lastIndexOf(marker);
  if (at < 0) throw new Error(`node-llama-cpp resolved outside a node_modules directory: ${main}`);
  return main.slice(0, at + `${path.sep}node_modules`.length);
}

function readVersion(dir: string): string | undefined {
  try {
    const v = (JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as { version?: unknown }).version;
    return typeof v === "string" ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Why `b` cannot be used, as far as the files tell; undefined when it may work (the probe then
 * decides). Pure: the tests give it the facts.
 */
export function staticReason(b: InstalledBackend, llamaVersion: string, host: HostFacts): string | undefined {
  if (b.version !== llamaVersion) {
    return `its binaries are for node-llama-cpp ${b.version}, lmd runs ${llamaVersion}: install the ${SYSTEM_PACKAGE[b.backend]} package of this lmd version`;
  }
  if (b.backend === "cuda") {
    if (!host.hasLibrary("libcuda.so.1")) return "the NVIDIA driver is not installed (no libcuda.so.1 on the library path)";
    if (!host.hasDevice("/dev/nvidiactl")) return "no NVIDIA device (/dev/nvidiactl is missing: driver not loaded, or the service may not see devices)";
  } else {
    if (!host.hasLibrary("libvulkan.so.1")) return "the Vulkan loader is not installed (no libvulkan.so.1; Debian: apt install libvulkan1 mesa-vulkan-drivers)";
    if (!host.hasDevice("/dev/dri")) return "no GPU device (/dev/dri is missing)";
  }
  return undefined;
}

/** What the files on this host say: ld.so.cache, LD_LIBRARY_PATH and the usual library directories. */
export function realHost(env: NodeJS.ProcessEnv = process.env): HostFacts {
  let cache: string | undefined;
  const system = ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu", "/lib64"];
  const dirs = [...(env.LD_LIBRARY_PATH ?? "").split(":").filter(Boolean), ...system];
  return {
    hasLibrary(name) {
      cache ??= (() => {
        try {
          return readFileSync("/etc/ld.so.cache", "latin1");
        } catch {
          return "";
        }
      })();
      return cache.includes(`${name}\0`) || dirs.some((d) => existsSync(path.join(d, name)));
    },
    hasDevice: (file) => existsSync(file),
  };
}

/** The backend the runners use and why installed GPU binaries are not used. */
export interface BackendReport {
  backend: GpuBackend | "cpu";
  devices: string[];
  vramBytes: number;
  /** Installed backends that are not used, with the reason; `broken`: it opened and failed its smoke test. */
  unused: { backend: GpuBackend; packaged: boolean; reason: string; broken?: boolean }[];
  /** The probe could not open any backend (its message). */
  error?: string | undefined;
}

/**
 * Finds the backend (running the probe when a GPU backend may work) and logs it: info for the
 * backend in use, warning for each GPU package that is installed and not used (with the reason),
 * error when SERVICE_GPU insists on a backend that cannot work (model loads will fail).
 */
export async function reportBackend(mode: GpuMode, log: Logger, host: HostFacts = realHost(), nodeModules?: string): Promise<BackendReport> {
  const report = await findBackend(mode, host, nodeModules);
  logReport(mode, report, log);
  return report;
}

/** Runs the probe process (tests pass a stand-in for a GPU host). */
export type Probe = (mode: GpuMode, candidates: GpuBackend[]) => Promise<ProbeResult>;

export async function findBackend(
  mode: GpuMode,
  host: HostFacts = realHost(),
  nodeModules = nodeModulesDir(),
  probe: Probe = runProbe,
): Promise<BackendReport> {
  if (mode === false) return { backend: "cpu", devices: [], vramBytes: 0, unused: [] };
  const { llamaVersion, installed } = installedBackends(nodeModules);
  const unused: BackendReport["unused"] = [];
  const candidates: InstalledBackend[] = [];
  for (const b of installed) {
    if (mode !== "auto" && b.backend !== mode) continue;
    const reason = staticReason(b, llamaVersion, host);
    if (reason) unused.push({ backend: b.backend, packaged: b.packaged, reason });
    else candidates.push(b);
  }
  if (mode !== "auto" && !installed.some((b) => b.backend === mode)) {
    const error = `the ${mode} binaries are not installed (${GPU_PACKAGES[mode].join(", ")}; package ${SYSTEM_PACKAGE[mode]})`;
    return { backend: "cpu", devices: [], vramBytes: 0, unused, error };
  }
  if (candidates.length === 0) {
    const error = mode !== "auto" ? unused.find((u) => u.backend === mode)?.reason : undefined;
    return { backend: "cpu", devices: [], vramBytes: 0, unused, ...(error ? { error } : {}) };
  }
  const probed = await probe(mode, candidates.map((c) => c.backend));
  let backend = probed.backend;
  let error = probed.error;
  if (backend !== "cpu" && probed.smoke === "failed") {
    const reason = smokeFailure(backend, probed.devices, probed.smokeError);
    const c = candidates.find((x) => x.backend === backend);
    unused.push({ backend, packaged: c?.packaged ?? false, reason, broken: true });
    if (mode === backend) error = reason;
    backend = "cpu";
  }
  for (const c of candidates) {
    if (probed.backend === c.backend) continue;
    unused.push({ backend: c.backend, packaged: c.packaged, reason: probed.reasons[c.backend] ?? "the backend found no usable device" });
  }
  const gpu = backend !== "cpu";
  return { backend, devices: gpu ? probed.devices : [], vramBytes: gpu ? probed.vramBytes : 0, unused, ...(error ? { error } : {}) };
}

/** The reason a backend that opened is not used: its smoke test failed, with llama.cpp's words. */
export function smokeFailure(backend: GpuBackend, devices: string[], detail: string | undefined): string {
  const on = devices.length > 0 ? ` on ${devices.join(", ")}` : "";
  const fix = backend === "cuda" ? "update the NVIDIA driver, or set SERVICE_GPU=false" : "update the GPU driver, or set SERVICE_GPU=false";
  return `the ${backend} backend fails its first decode${on}: ${detail ?? "the probe process stopped"} (${fix})`;
}

/**
 * The `gpu` the runners are started with, once the report is in: the configured mode, except that
 * with `auto` a GPU backend that fails its smoke test would be taken by every runner and crash it
 * at the first decode, so the runners use the CPU. When SERVICE_GPU insists on that backend, loads
 * are refused with the reason (`refusal`) instead of crashing.
 */
export function runnerGpu(mode: GpuMode, r: BackendReport): { gpu: RunnerGpu; refusal?: string } {
  const broken = r.unused.find((u) => u.broken);
  if (!broken) return { gpu: mode };
  if (mode === "auto") return { gpu: false };
  if (mode === broken.backend) return { gpu: mode, refusal: `no usable llama.cpp backend: SERVICE_GPU is ${mode}, but ${broken.reason}` };
  return { gpu: mode };
}

/**
 * Forks runner/probe.ts with the runners' environment; a probe that fails or hangs is a result too.
 * The smoke test's model is written to a scratch directory made here and removed when the probe
 * exits, however it exits. A probe that dies or hangs during its smoke test (its last answer says
 * `pending`) failed it, with llama.cpp's error line from its stderr as the reason.
 */
export function runProbe(
  mode: GpuMode,
  candidates: GpuBackend[],
  timeoutMs = 120_000,
  entry = path.join(path.dirname(childEntry()), "../probe.js"),
): Promise<ProbeResult> {
  return new Promise((resolve) => {
    const scratch = mkdtempSync(path.join(os.tmpdir(), "lmd-probe-"));
    // GGML_NO_BACKTRACE: an abort exits at once instead of running gdb for a backtrace.
    const child = fork(entry, [String(mode), scratch, ...candidates], {
      env: { ...runnerEnv(), GGML_NO_BACKTRACE: "1" },
      execArgv: [],
      stdio: ["ignore", "pipe", "pipe", "ipc"],
      serialization: "json",
    });
    // llama.cpp's lines during the smoke test come on both (runner/probe.ts).
    const stdout = new ErrorLines();
    const stderr = new ErrorLines();
    let result: ProbeResult | undefined;
    child.stdout?.on("data", (d: Buffer) => stdout.add(d.toString()));
    child.stderr?.on("data", (d: Buffer) => stderr.add(d.toString()));
    child.on("message", (m: ProbeResult) => (result = m));
    let timedOut = false;
    const timer = setTimeout(() => ((timedOut = true), child.kill("SIGKILL")), timeoutMs);
    let settled = false;
    const done = (why: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      rmSync(scratch, { recursive: true, force: true });
      if (result?.smoke === "pending" || result?.smoke === "failed") {
        const detail =
          stdout.error() ?? stderr.error() ?? (result.smoke === "failed" ? result.smokeError : undefined) ?? (stderr.last() || undefined) ??
          (timedOut ? `it did not finish within ${timeoutMs / 1000} s` : `the probe process ${why}`);
        return resolve({ ...result, smoke: "failed", smokeError: detail });
      }
      const last = stderr.last();
      resolve(
        result ?? { backend: "cpu", devices: [], vramBytes: 0, reasons: {}, smoke: "skipped", error: `the backend probe ${why}${last ? `: ${last}` : ""}` },
      );
    };
    child.on("exit", (code, signal) => done(signal ? `was killed (${signal})` : `exited with status ${code}`));
    child.on("error", (err) => done(`could not start (${err.message})`));
  });
}

/**
 * A probe's stderr, kept as llama.cpp's error lines (`CUDA error: the provided PTX was compiled with
 * an unsupported toolchain.`) and the last line: an abort can print many lines after the one that
 * says why.
 */
/** The line the probe writes to stderr as its smoke test starts (runner/probe.ts). */
export const SMOKE_MARKER = "lmd-probe: smoke test";

class ErrorLines {
  private partial = "";
  private readonly errors: string[] = [];
  private lastLine = "";

  add(text: string): void {
    const lines = (this.partial + text).split("\n");
    this.partial = lines.pop()!.slice(-2000);
    for (const raw of lines) this.line(raw);
  }

  private line(raw: string): void {
    const line = raw.trim().slice(0, 500);
    if (!line) return;
    if (line === SMOKE_MARKER) {
      // What came before was the opening of the backends, which succeeded.
      this.errors.length = 0;
      this.lastLine = "";
      return;
    }
    this.lastLine = line;
    // "CUDA error: …", "ggml_vulkan: Error: …"; not ggml's own "file.cu:88: CUDA error" abort line.
    if (/\berror: \S/i.test(line) && this.errors.length < 20) this.errors.push(line.replace(/^llama\.cpp: /, "").replace(/\.$/, ""));
  }

  private flushPartial(): void {
    if (this.partial) this.line(this.partial);
    this.partial = "";
  }

  /** The first error line (since the smoke test's marker). */
  error(): string | undefined {
    this.flushPartial();
    return this.errors[0];
  }

  last(): string {
    this.flushPartial();
    return this.lastLine;
  }
}

export function logReport(mode: GpuMode, r: BackendReport, log: Logger): void {
  const gpu = r.backend !== "cpu";
  log.info(
    { backend: r.backend, gpu: mode === false ? "false" : mode, ...(gpu ? { devices: r.devices, vram: formatBytes(r.vramBytes) } : {}) },
    gpu ? `llama.cpp backend: ${r.backend} (${r.devices.join(", ") || "a GPU"})` : `llama.cpp backend: cpu${mode === false ? " (SERVICE_GPU=false)" : ""}`,
  );
  for (const u of r.unused) {
    const what = u.packaged ? `${SYSTEM_PACKAGE[u.backend]} is installed` : `the ${u.backend} binaries are installed`;
    const msg = `${what} but not used: ${u.reason}${gpu ? "" : "; models run on the CPU"}`;
    const fields = { backend: u.backend, reason: u.reason };
    if (mode === u.backend) continue; // said below, as an error
    // A broken backend is a warning wherever it came from: node-llama-cpp would take it.
    if (u.packaged || u.broken) log.warn(fields, msg);
    else log.info(fields, msg);
  }
  if (mode !== false && mode !== "auto" && r.backend !== mode) {
    log.error(
      { backend: mode, reason: r.error },
      `SERVICE_GPU is ${mode}, but the ${mode} backend cannot be used: ${r.error ?? "no usable device"}; model loads will fail`,
    );
  }
}
