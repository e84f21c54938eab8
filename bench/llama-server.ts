/**
 * llama.cpp's own llama-server, built once from the source node-llama-cpp ships
 * (bench/build-llama-server.sh), as the reference for serving speed. Optional: `--llama-server`.
 * Every figure is timed by the client, as lmd's are (bench/http.ts): same clock, same HTTP.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { closeSync, copyFileSync, existsSync, mkdirSync, openSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import { readGgufFileInfo } from "node-llama-cpp";
import { flashAttentionFor } from "../src/runner/attention.js";
import type { Sampling } from "./http.js";
import { track } from "./procs.js";

/** A free loopback port (for the servers the benchmark starts). */
export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * Which llama.cpp libraries llama-server runs on. `native`: its own build (bench/build-llama-server.sh:
 * GGML_NATIVE, OpenMP, llama.cpp's defaults for a local build). `prebuilt`: the same llama-server on
 * node-llama-cpp's prebuilt llama.cpp libraries, the ones lmd's runners load (a CPU backend per
 * instruction-set level chosen at run time, as llama.cpp's own release binaries are built): the same
 * engine binary on both sides, so the ratio is the serving layers'. `auto`: native, unless it does not
 * start on this host (a native build's AMX kernels crash on some virtualized Xeons: llama.cpp PR
 * #26954), then prebuilt, said on stderr and in the table's last line.
 */
export type LlamaServerEngine = "native" | "prebuilt" | "auto";

interface Launch {
  bin: string;
  env: NodeJS.ProcessEnv;
  /** `given`: a binary named with `--llama-server-bin` (the GPU runs: built with the addon, bench/build-cuda.sh). */
  engine: "native" | "prebuilt" | "given";
  /** `-ngl`: layers offloaded to the GPU (undefined: none, a CPU run). */
  gpuLayers?: number | undefined;
  /** Where its stderr goes (a failed run of the benchmark names the file). */
  log?: string | undefined;
}

let native: string | undefined;
/** Whether a launch turned flash attention off as lmd does (said in the table's last line). */
let flashAttentionOff = false;
let chosen: Launch | undefined;

/** Builds llama-server once per run (the script returns at once when the cache holds this version). */
export function llamaServerBinary(root: string, cache: string): string {
  if (!native) {
    process.stderr.write("llama-server: building once if the cache lacks it (minutes)…\n");
    native = execFileSync(path.join(root, "bench/build-llama-server.sh"), [cache], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] })
      .trim()
      .split("\n")
      .pop()!;
  }
  return native;
}

/**
 * llama-server with node-llama-cpp's prebuilt libraries: a directory holding the llama-server built
 * from source with its own server and common libraries, and links to the prebuilt libllama, libggml
 * and CPU backends under the names llama-server was linked against (the same llama.cpp commit: only
 * llama.h's and ggml.h's C interfaces cross between the two builds).
 */
function prebuiltEngine(root: string, cache: string): Launch {
  const built = path.dirname(llamaServerBinary(root, cache));
  const prebuilt = path.join(root, "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64");
  if (!existsSync(prebuilt)) throw new Error(`node-llama-cpp's prebuilt libraries are not at ${prebuilt}`);
  const dir = path.join(cache, "llama-server-prebuilt-engine");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const f of readdirSync(built)) {
    if (f === "llama-server" || /^lib(llama-server-impl|mtmd|llama-common)\.so/.test(f)) copyFileSync(path.join(built, f), path.join(dir, f));
  }
  for (const f of readdirSync(prebuilt)) if (f.endsWith(".so") && !f.startsWith("libllama-common")) symlinkSync(path.join(prebuilt, f), path.join(dir, f));
  const alias: Record<string, string> = { "libllama.so.0": "libllama.v0.5.0.so", "libggml.so.0": "libggml.v0.5.0.so", "libggml-base.so.0": "libggml-base.so" };
  for (const [name, target] of Object.entries(alias)) {
    if (!existsSync(path.join(prebuilt, target))) throw new Error(`node-llama-cpp's prebuilt ${target} is missing (another llama.cpp release?)`);
    if (!existsSync(path.join(dir, name))) symlinkSync(path.join(prebuilt, target), path.join(dir, name));
  }
  return { bin: path.join(dir, "llama-server"), env: { ...process.env, LD_LIBRARY_PATH: dir }, engine: "prebuilt" };
}

/**
 * `-fa` as lmd's runner decides SERVICE_FLASH_ATTENTION=auto for this model (src/runner/attention.ts):
 * both sides then run the same engine work, and the ratio is what the serving around it costs.
 * llama-server's own default ("auto": on wherever the backend has it) is slower on the CPU for
 * heads narrower than 64 values.
 */
async function flashAttentionArgs(model: string, gpuLayers: number | undefined): Promise<string[]> {
  const ggufFileInfo = await readGgufFileInfo(model, { readTensorInfo: false, sourceType: "filesystem" });
  return flashAttentionFor({}, { ggufFileInfo }, gpuLayers ?? 0) === false ? ["-fa", "off"] : [];
}

async function launch(l: Launch, model: string, threads: number, parallel: number): Promise<{ url: string; child: ChildProcess } | { exit: string }> {
  const port = await freePort();
  const args = [
    "-m",
    model,
    "-t",
    String(threads),
    "-tb",
    String(threads),
    "-c",
    String(4096 * parallel),
    "-np",
    String(parallel),
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
  ];
  if (l.gpuLayers !== undefined) args.push("-ngl", String(l.gpuLayers));
  const fa = await flashAttentionArgs(model, l.gpuLayers);
  if (fa.length) flashAttentionOff = true;
  args.push(...fa);
  const stderr = l.log ? openSync(l.log, "a") : "ignore";
  const child = track(spawn(l.bin, args, { stdio: ["ignore", "ignore", stderr], env: l.env }));
  if (typeof stderr === "number") closeSync(stderr);
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null || child.signalCode !== null) return { exit: child.signalCode ?? `exit code ${child.exitCode}` };
    const ok = await fetch(`${url}/health`).then((r) => r.ok, () => false);
    if (ok) return { url, child };
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill("SIGKILL");
  throw new Error("llama-server did not become healthy within 60 s");
}

/** What the run's llama-server figures were measured on, for the table (undefined before the first start). */
export function llamaServerEngine(): string | undefined {
  if (!chosen) return undefined;
  const fa = flashAttentionOff ? ", `-fa off` as lmd's runner has it for this model" : "";
  return engineLabel(chosen) + fa;
}

function engineLabel(chosen: Launch): string {
  if (chosen.engine === "given") return `llama-server: ${chosen.bin}${chosen.gpuLayers === undefined ? "" : `, -ngl ${chosen.gpuLayers}`}`;
  return chosen.engine === "native" ? "llama-server: native build" : "llama-server: node-llama-cpp's prebuilt llama.cpp libraries";
}

/** Every later start runs `bin` (with `-ngl gpuLayers` on a GPU, its stderr appended to `log`) instead of a build of the bench's own. */
export function useLlamaServerBinary(bin: string, gpuLayers?: number, log?: string): void {
  if (!existsSync(bin)) throw new Error(`--llama-server-bin: ${bin} does not exist`);
  chosen = { bin, env: process.env, engine: "given", gpuLayers, log };
}

/** Where every llama-server of a run writes its log (each start appends), begun afresh by the run's first start. */
export function logFile(cache: string): string {
  const file = path.join(cache, "llama-server.log");
  if (!logBegun) writeFileSync(file, "");
  logBegun = true;
  return file;
}
let logBegun = false;

/** llama-server with `-np parallel` slots of 4096 tokens each (lmd's SERVICE_CONTEXT_LENGTH per sequence). */
export async function startLlamaServer(
  root: string,
  cache: string,
  model: string,
  threads: number,
  parallel = 1,
  engine: LlamaServerEngine = "auto",
): Promise<{ url: string; child: ChildProcess }> {
  if (!chosen) {
    chosen = engine === "prebuilt" ? prebuiltEngine(root, cache) : { bin: llamaServerBinary(root, cache), env: process.env, engine: "native" };
    chosen.log = logFile(cache);
    const first = await launch(chosen, model, threads, parallel);
    if ("url" in first) return first;
    if (engine !== "auto" || chosen.engine !== "native") throw new Error(`llama-server (${chosen.engine}) ended at startup (${first.exit})`);
    process.stderr.write(
      `llama-server (native build) ended at startup on this host (${first.exit}); using it on node-llama-cpp's prebuilt llama.cpp libraries instead\n`,
    );
    chosen = { ...prebuiltEngine(root, cache), log: logFile(cache) };
  }
  const started = await launch(chosen, model, threads, parallel);
  if ("exit" in started) throw new Error(`llama-server (${chosen.engine}) ended at startup (${started.exit})`);
  return started;
}

export interface Completion {
  /** ms from sending the request to the first streamed line (the first token, after the prompt). */
  ttftMs: number;
  /** performance.now() of the first and last token lines. */
  first: number;
  last: number;
  /** Tokens predicted and prompt tokens evaluated, from llama-server's final `timings`. */
  predicted: number;
  promptTokens: number;
}

/** The request body for `/completion` with the benchmark's sampling. */
export function completionBody(prompt: string, tokens: number, s: Sampling, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    prompt,
    n_predict: tokens,
    stream: true,
    cache_prompt: false,
    temperature: s.temperature,
    top_k: s.top_k,
    top_p: s.top_p,
    min_p: s.min_p,
    seed: s.seed,
    repeat_penalty: s.repeat_penalty,
    ...extra,
  };
}

/** One streamed `/completion`; `onToken` sees each token line (for background streams). */
export async function llamaServerComplete(url: string, body: Record<string, unknown>, signal?: AbortSignal, onToken?: () => void): Promise<Completion> {
  const sent = performance.now();
  const send = () => fetch(`${url}/completion`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal });
  // A pooled keep-alive socket that llama-server closed as the request went out fails before any
  // answer (undici retries only idempotent requests): send again. Several pooled sockets can be in
  // that state at once (streams sent together, idle as long), so up to 3 attempts.
  const attempt = (left: number): Promise<Response> =>
    send().catch((err: unknown) => {
      if (signal?.aborted || left === 0) throw err;
      console.error(`llama-server request failed before an answer (${String((err as { cause?: unknown }).cause ?? err)}); sending again`);
      return attempt(left - 1);
    });
  const res = await attempt(2);
  if (!res.ok || !res.body) throw new Error(`llama-server answered ${res.status}`);
  const decoder = new TextDecoder();
  let buf = "";
  let first = 0;
  let last = 0;
  let predicted = 0;
  let promptTokens = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (!line.startsWith("data: ")) continue;
      const now = performance.now();
      if (!first) first = now;
      const data = JSON.parse(line.slice(6)) as { stop?: boolean; timings?: { predicted_n?: number; prompt_n?: number } };
      if (data.stop) {
        predicted = data.timings?.predicted_n ?? predicted;
        promptTokens = data.timings?.prompt_n ?? promptTokens;
      } else {
        last = now;
        onToken?.();
      }
    }
  }
  if (!last) last = first;
  return { ttftMs: first - sent, first, last, predicted, promptTokens };
}

/** Client-side decode tokens/s of one streamed completion (tokens after the first, per second). */
export async function llamaServerDecode(url: string, prompt: string, tokens: number, s: Sampling): Promise<number> {
  const c = await llamaServerComplete(url, completionBody(prompt, tokens, s, { ignore_eos: true }));
  if (c.predicted !== tokens) throw new Error(`llama-server generated ${c.predicted} of ${tokens} tokens`);
  return (c.predicted - 1) / ((c.last - c.first) / 1000);
}

/** Prefill tokens/s of a fresh prompt: prompt tokens over the client's time to the first token, as for lmd. */
export async function llamaServerPrefill(url: string, prompt: string, s: Sampling): Promise<number> {
  const c = await llamaServerComplete(url, completionBody(prompt, 1, s));
  return c.promptTokens / (c.ttftMs / 1000);
}
