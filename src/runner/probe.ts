/**
 * The backend probe (forked by src/backend.ts at start, with a runner's environment): opens
 * node-llama-cpp as a runner does and reports which backend it got, its devices and VRAM, and for
 * each other candidate backend why it was not taken. node-llama-cpp says only "not compatible"
 * when a prebuilt GPU binary fails its test; loading the backend library here gives the dynamic
 * linker's own reason (`libcudart.so.13: cannot open shared object file`). The process exits
 * after its answer, so what it loaded goes with it.
 *
 * A GPU backend that opens can still fail at its first decode: prebuilt CUDA binaries built with a
 * newer CUDA than the driver supports find the device, load a model, and abort the process
 * (SIGABRT) in the first kernel launch ("the provided PTX was compiled with an unsupported
 * toolchain"). So with a GPU backend the probe first sends what it opened, then loads a tiny
 * generated model with every layer offloaded, decodes a few tokens and samples one (the smoke
 * test), and sends the result again. When the process dies in between, the parent has the first
 * answer and llama.cpp's error lines, which the addon writes to stdout and stderr during the test.
 *
 *   argv: <mode: auto|cuda|vulkan> <scratch directory for the smoke test's model> <candidate backends...>
 */
import { readdirSync, writeSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import type { Llama } from "node-llama-cpp";
import { openLlama } from "./engine.js";
import { smokeTest } from "./smoke.js";

export interface ProbeResult {
  backend: "cuda" | "vulkan" | "cpu";
  devices: string[];
  vramBytes: number;
  /** Why each candidate that was not taken failed. */
  reasons: Partial<Record<"cuda" | "vulkan", string>>;
  /** node-llama-cpp could not be opened at all. */
  error?: string | undefined;
  /**
   * The smoke test of a GPU backend: `pending` in the first answer (sent before it runs), then
   * `passed` or `failed` (with `smokeError`); `skipped` on the CPU.
   */
  smoke: "skipped" | "pending" | "passed" | "failed";
  /** Why the smoke test failed: llama.cpp's first error line, else the exception's message. */
  smokeError?: string | undefined;
}

const PACKAGE: Record<"cuda" | "vulkan", string[]> = {
  cuda: ["@node-llama-cpp/linux-x64-cuda", "@node-llama-cpp/linux-x64-cuda-ext"],
  vulkan: ["@node-llama-cpp/linux-x64-vulkan"],
};

/** Loads a shared library into this process; undefined when the dynamic linker can load it, else its message. */
export function loadError(file: string): string | undefined {
  try {
    process.dlopen({ exports: {} } as NodeJS.Module, file);
    return undefined;
  } catch (err) {
    const message = (err as Error).message;
    // Loaded, but not a Node addon: the library and everything it needs are there.
    if (/did not self-register|Module did not|napi_register_module/i.test(message)) return undefined;
    return message.replace(/\s+/g, " ").trim();
  }
}

/** The backend's libggml-<backend>.so files, main build first (the CUDA -ext package adds a fallback build). */
function backendLibraries(backend: "cuda" | "vulkan"): string[] {
  const require = createRequire(createRequire(import.meta.url).resolve("node-llama-cpp"));
  const files: string[] = [];
  for (const pkg of PACKAGE[backend]) {
    let root: string;
    try {
      root = path.dirname(path.dirname(require.resolve(pkg)));
    } catch {
      continue;
    }
    const bins = path.join(root, "bins", `linux-x64-${backend}`);
    for (const dir of [bins, path.join(bins, "fallback")]) {
      try {
        for (const f of readdirSync(dir)) if (f === `libggml-${backend}.so`) files.push(path.join(dir, f));
      } catch {
        // no such directory in this package
      }
    }
  }
  return files;
}

/** Why `backend`'s library does not load, or that it loads and found no device. */
function whyNot(backend: "cuda" | "vulkan"): string {
  const libs = backendLibraries(backend);
  if (libs.length === 0) return `no libggml-${backend}.so in its packages`;
  const errors = libs.map((file) => ({ file, error: loadError(file) }));
  if (errors.some((e) => e.error === undefined)) return "its library loads, but the backend found no usable device";
  const label = (file: string) => (path.basename(path.dirname(file)) === "fallback" ? `fallback/${path.basename(file)}` : path.basename(file));
  return errors.map((e) => `${label(e.file)} does not load: ${e.error}`).join("; ");
}

const send = (message: ProbeResult) => new Promise<void>((resolve) => (process.send ? process.send(message, () => resolve()) : resolve()));

async function main(): Promise<void> {
  const [modeArg, scratch, ...candidates] = process.argv.slice(2) as [string, string, ...("cuda" | "vulkan")[]];
  const mode = modeArg === "cuda" || modeArg === "vulkan" ? modeArg : "auto";
  const result: ProbeResult = { backend: "cpu", devices: [], vramBytes: 0, reasons: {}, smoke: "skipped" };
  const errors: string[] = [];
  let llama: Llama | undefined;
  try {
    llama = await openLlama(mode, (level, message) => {
      if (level !== "error") return;
      errors.push(message);
      writeSync(2, `${message}\n`); // at once: an abort may follow
    });
    if (llama.gpu === "cuda" || llama.gpu === "vulkan") {
      result.backend = llama.gpu;
      result.devices = await llama.getGpuDeviceNames();
      result.vramBytes = (await llama.getVramState()).total;
    }
  } catch (err) {
    result.error = (err as Error).message;
  }
  for (const c of candidates) if (c !== result.backend) result.reasons[c] = whyNot(c);
  if (llama && result.backend !== "cpu") {
    await send({ ...result, smoke: "pending" });
    // The parent reads llama.cpp's error lines from here on. node-llama-cpp passes them to its
    // logger through a queue that an abort does not wait for (the line that says why is lost);
    // without a logger its addon writes them to the process's own output at once (errors on stdout).
    (llama as unknown as { _bindings?: { setLogger?: () => void } })._bindings?.setLogger?.();
    for (const fd of [1, 2]) writeSync(fd, "lmd-probe: smoke test\n");
    const before = errors.length;
    try {
      await smokeTest(llama, scratch);
      result.smoke = "passed";
    } catch (err) {
      result.smoke = "failed";
      result.smokeError = (errors[before] ?? (err as Error).message).replace(/^llama\.cpp: /, "");
    }
  }
  await send(result);
  process.exit(0);
}

void main();
