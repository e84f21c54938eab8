/**
 * Starting a runner child: its entry file and environment (one libuv thread, the threadpool library,
 * the GPUs it may see), the model file's check before any fork, and the load handshake (progress,
 * the memory estimate and its admission, the loaded model's facts), each failure a typed load error.
 */
import { fork, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import type { Logger } from "pino";
import { ModelLoadError } from "../errors.js";
import { GgufError, validateGguf } from "../gguf/gguf.js";
import { formatBytes } from "../units.js";
import type { FromRunner, RunnerFailureKind, ToRunner } from "./protocol.js";
import type { LoadSpec, MemoryEstimate, RunnerInfo } from "./types.js";

/** Path of the compiled child entry. Under a TypeScript loader (tests) the compiled file in dist/ is used. */
export function childEntry(): string {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith(".js")) return here.replace(/spawn\.js$/, "child/entry.js");
  const compiled = fileURLToPath(new URL("../../dist/src/runner/child/entry.js", import.meta.url));
  if (!existsSync(compiled)) throw new Error(`runner entry ${compiled} is missing: run 'npm run build' first`);
  return compiled;
}

/**
 * The library that gives a runner's contexts one persistent ggml threadpool instead of a thread
 * per decode (src/native/threadpool.c, built by scripts/build-native next to dist/src), or
 * undefined when no C compiler built it.
 */
export function threadpoolLibrary(): string | undefined {
  const file = path.join(path.dirname(childEntry()), "../../../native/lmd-threadpool.so");
  return existsSync(file) ? file : undefined;
}

/**
 * A runner's environment: one libuv thread, the threadpool library preloaded when there is one,
 * and, when the policy file places the model (`gpus`), only those GPUs visible.
 */
export function runnerEnv(gpus?: readonly number[], base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const library = threadpoolLibrary();
  // UV_THREADPOOL_SIZE=1 pins llama.cpp's decode calls to one libuv thread, which speeds decoding
  // up on small machines (docs/benchmarks.md). It must be set before Node starts.
  const env: NodeJS.ProcessEnv = { ...base, UV_THREADPOOL_SIZE: "1" };
  if (library) env.LD_PRELOAD = [base.LD_PRELOAD, library].filter(Boolean).join(" ");
  if (gpus !== undefined) Object.assign(env, visibleDevicesEnv(gpus));
  return env;
}

/**
 * The variables that restrict the GPUs a process sees, one per backend: the CUDA runtime reads
 * CUDA_VISIBLE_DEVICES, llama.cpp's Vulkan backend GGML_VK_VISIBLE_DEVICES (both before they
 * enumerate devices, so they must be in the environment the child starts with). An empty list
 * hides every GPU. CUDA numbers its devices fastest first unless told to use the PCI bus order,
 * which is nvidia-smi's (and the one an operator reads the indices from).
 */
export function visibleDevicesEnv(gpus: readonly number[]): Record<string, string> {
  const list = gpus.join(",");
  return { CUDA_DEVICE_ORDER: "PCI_BUS_ID", CUDA_VISIBLE_DEVICES: list, GGML_VK_VISIBLE_DEVICES: list };
}

export interface RunnerOptions {
  /** Model name for messages (`failed to load model '<name>'`). */
  name: string;
  log: Logger;
  /** A load that reports no progress for this long is abandoned and the child killed. */
  loadTimeoutMs: number;
  /** A job whose prompt the model's chat template has not rendered after this long kills the child (SERVICE_RENDER_TIMEOUT); undefined = no budget. */
  renderTimeoutMs?: number | undefined;
  /**
   * Decides on the child's memory estimate before anything is loaded: resolves to let the load go
   * ahead (after making room), rejects (a {@link ModelLoadError}) to refuse it. Absent = admit.
   */
  admit?: ((estimate: MemoryEstimate) => Promise<void>) | undefined;
  /** Aborting it while the model loads kills the child and rejects with `load cancelled`. */
  signal?: AbortSignal | undefined;
}

/** Forks a runner child for `spec` (its model file checked first) and waits until the model is loaded. */
export async function spawnRunner(spec: LoadSpec, options: RunnerOptions): Promise<{ child: ChildProcess; info: RunnerInfo }> {
  await checkModelFile(spec.path, options.name); // a malformed file never reaches llama.cpp
  // Cancelled while the file was checked: the abort listener of the load would never hear of it (an
  // aborted signal fires no more events) and the model would load for nobody.
  if (options.signal?.aborted) throw new ModelLoadError(options.name, "load cancelled");
  const child = fork(childEntry(), [], {
    env: runnerEnv(spec.gpus),
    execArgv: [],
    stdio: ["ignore", "pipe", "pipe", "ipc"],
    serialization: "json",
    // A process group of its own: Ctrl+C in a terminal or a group-wide signal reaches the daemon,
    // which then stops its runners in order, instead of killing them mid-generation.
    detached: true,
  });
  forwardOutput(child, options.log);
  return { child, info: await waitForLoad(child, spec, options) };
}

/**
 * Validates the GGUF structure before any child is forked: node-llama-cpp's own reader spins or
 * throws on crafted counts and lengths, and llama.cpp trusts tensor offsets (see gguf/gguf.ts).
 */
async function checkModelFile(file: string, name: string): Promise<void> {
  try {
    await validateGguf(file);
  } catch (err) {
    if (err instanceof GgufError) throw new ModelLoadError(name, `corrupt model file: ${err.message}`);
    throw new ModelLoadError(name, "the model file could not be read", err);
  }
}

function loadError(name: string, kind: RunnerFailureKind, message: string): ModelLoadError {
  if (kind === "corrupt") return new ModelLoadError(name, `corrupt model file: ${message}`);
  if (kind === "memory") return new ModelLoadError(name, `not enough memory to load the model (${message})`);
  return new ModelLoadError(name, message);
}

function waitForLoad(child: ChildProcess, spec: LoadSpec, options: RunnerOptions): Promise<RunnerInfo> {
  return new Promise<RunnerInfo>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const fail = (err: ModelLoadError) => {
      finish();
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      reject(err);
    };
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        options.log.error({ model: options.name, timeoutMs: options.loadTimeoutMs }, "model load made no progress; killing its runner");
        fail(new ModelLoadError(options.name, `timed out after ${Math.round(options.loadTimeoutMs / 1000)}s without progress`));
      }, options.loadTimeoutMs);
    };
    const onMessage = (msg: FromRunner) => {
      if (msg.type === "progress") arm();
      else if (msg.type === "estimate") {
        // The memory check may evict other models first; the no-progress timer waits meanwhile.
        clearTimeout(timer);
        const admit = options.admit ?? (() => Promise.resolve());
        admit(msg.estimate).then(
          () => (child.send({ type: "admit" } satisfies ToRunner), arm()),
          (err: unknown) => fail(err instanceof ModelLoadError ? err : new ModelLoadError(options.name, String(err))),
        );
      } else if (msg.type === "loaded") {
        finish();
        options.log.info(
          {
            model: options.name,
            runner: child.pid,
            ram: formatBytes(msg.info.ramBytes),
            contextSize: msg.info.contextSize,
            sequences: msg.info.sequences,
            gpu: msg.info.gpu,
            threads: msg.info.threads,
            binary: msg.info.binary,
            threadpool: msg.info.threadpool,
          },
          "model loaded",
        );
        resolve(msg.info);
      } else if (msg.type === "load-failed") {
        options.log.error({ model: options.name, kind: msg.kind, detail: msg.message }, "model failed to load");
        fail(loadError(options.name, msg.kind, msg.message));
      } else if (msg.type === "log") options.log[msg.level]({ runner: child.pid, ...msg.data }, msg.msg);
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      options.log.error({ model: options.name, code, signal }, "runner exited while loading the model");
      fail(new ModelLoadError(options.name, `the model runner exited while loading (${signal ? `signal ${signal}` : `exit status ${code}`})`));
    };
    const onError = (err: Error) => fail(new ModelLoadError(options.name, `could not start the model runner: ${err.message}`, err));
    // Every request waiting for this load went away: stop it rather than load a model nobody asked for.
    const onAbort = () => fail(new ModelLoadError(options.name, "load cancelled"));
    function finish() {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      child.off("message", onMessage);
      child.off("exit", onExit);
      child.off("error", onError);
    }
    child.on("message", onMessage);
    child.on("exit", onExit);
    child.on("error", onError);
    options.signal?.addEventListener("abort", onAbort, { once: true });
    arm();
    child.send({ type: "load", spec } satisfies ToRunner);
  });
}

/** Lines a child prints outside the protocol (native libraries write to stderr) go to the log. */
function forwardOutput(child: ChildProcess, log: Logger): void {
  for (const [stream, level] of [[child.stdout, "debug"], [child.stderr, "warn"]] as const) {
    if (!stream) continue;
    createInterface({ input: stream }).on("line", (line) => {
      if (line.trim()) log[level]({ runner: child.pid }, `runner output: ${line}`);
    });
  }
}
