/**
 * llama.cpp's own llama-server, built once from the source node-llama-cpp ships
 * (bench/build-llama-server.sh), as the reference for serving speed. Optional: `--llama-server`.
 * Every figure is timed by the client, as lmd's are (bench/http.ts): same clock, same HTTP.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import path from "node:path";
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

let binary: string | undefined;

/** Builds llama-server once per run (the script returns at once when the cache holds this version). */
export function llamaServerBinary(root: string, cache: string): string {
  if (!binary) {
    process.stderr.write("llama-server: building once if the cache lacks it (minutes)…\n");
    binary = execFileSync(path.join(root, "bench/build-llama-server.sh"), [cache], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim().split("\n").pop()!;
  }
  return binary;
}

/** llama-server with `-np parallel` slots of 4096 tokens each (lmd's SERVICE_CONTEXT_LENGTH per sequence). */
export async function startLlamaServer(root: string, cache: string, model: string, threads: number, parallel = 1): Promise<{ url: string; child: ChildProcess }> {
  const bin = llamaServerBinary(root, cache);
  const port = await freePort();
  const args = ["-m", model, "-t", String(threads), "-tb", String(threads), "-c", String(4096 * parallel), "-np", String(parallel), "--host", "127.0.0.1", "--port", String(port)];
  const child = track(spawn(bin, args, { stdio: "ignore" }));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600 && child.exitCode === null; i++) {
    const ok = await fetch(`${url}/health`).then((r) => r.ok, () => false);
    if (ok) return { url, child };
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill("SIGKILL");
  throw new Error("llama-server did not become healthy within 60 s");
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
  return { prompt, n_predict: tokens, stream: true, cache_prompt: false, temperature: s.temperature, top_k: s.top_k, top_p: s.top_p, min_p: s.min_p, seed: s.seed, repeat_penalty: s.repeat_penalty, ...extra };
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
  const c = await llamaServerComplete(url, completionBody(prompt, tokens, s));
  return (c.predicted - 1) / ((c.last - c.first) / 1000);
}

/** Prefill tokens/s of a fresh prompt: prompt tokens over the client's time to the first token, as for lmd. */
export async function llamaServerPrefill(url: string, prompt: string, s: Sampling): Promise<number> {
  const c = await llamaServerComplete(url, completionBody(prompt, 1, s));
  return c.promptTokens / (c.ttftMs / 1000);
}
