/**
 * lmd's side of the benchmark: streaming generate requests timed by the client, and HTTP
 * requests/s against a bare node:http server answering the same body (autocannon).
 */
import { fork } from "node:child_process";
import path from "node:path";
import type { DecodeResult } from "./direct.js";

export interface Sampling {
  temperature: number;
  top_k: number;
  top_p: number;
  min_p: number;
  seed: number;
  repeat_penalty: number;
}

export interface Generated {
  /** ms from sending the request to the first token's line. */
  ttftMs: number;
  firstMs: number;
  lastMs: number;
  evalCount: number;
  promptEvalCount: number;
  context: number[];
  /** Speculative decoding's counts, when it ran. */
  draftCount?: number | undefined;
  draftAcceptedCount?: number | undefined;
}

/**
 * One streaming /api/generate; times are ms since `t0` (performance.now()). Aborting `signal` ends
 * it early (the daemon cancels the job when the client goes): the count is then the token lines
 * that came (one per token here: no stop sequences, no split characters in the bench's text).
 */
export async function lmdGenerate(url: string, body: Record<string, unknown>, t0 = performance.now(), signal?: AbortSignal): Promise<Generated> {
  const sent = performance.now();
  let buf = "";
  let first = 0;
  let last = 0;
  let lines = 0;
  let final: Record<string, unknown> = {};
  try {
    const res = await fetch(`${url}/api/generate`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });
    if (!res.ok || !res.body) throw new Error(`lmd answered ${res.status}: ${await res.text()}`);
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = JSON.parse(buf.slice(0, i)) as Record<string, unknown>;
        buf = buf.slice(i + 1);
        if (line.done) final = line;
        else {
          const now = performance.now();
          if (!first) first = now;
          last = now;
          lines++;
        }
      }
    }
    if (buf.trim()) final = JSON.parse(buf) as Record<string, unknown>;
  } catch (err) {
    if (!signal?.aborted) throw err;
  }
  if (!first) first = last = performance.now();
  return {
    ttftMs: first - sent,
    firstMs: first - t0,
    lastMs: last - t0,
    evalCount: Number(final.eval_count ?? lines),
    promptEvalCount: Number(final.prompt_eval_count ?? 0),
    context: (final.context as number[] | undefined) ?? [],
    draftCount: final.draft_count as number | undefined,
    draftAcceptedCount: final.draft_accepted_count as number | undefined,
  };
}

/** `streams` concurrent generations of `tokens` tokens through lmd. */
export async function lmdDecode(url: string, prompt: string, tokens: number, streams: number, sampling: Sampling, model = "bench"): Promise<DecodeResult> {
  const t0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: streams }, (_, i) =>
      lmdGenerate(url, { model, prompt: `${i} ${prompt}`, raw: true, stream: true, options: { ...sampling, num_predict: tokens } }, t0),
    ),
  );
  return { streams: results.map((r) => ({ tokens: r.evalCount, firstMs: r.firstMs, lastMs: r.lastMs })) };
}

/** autocannon is loaded when requests/s are measured: the other figures run with the production dependencies alone. */
async function cannon(url: string, seconds: number): Promise<number> {
  const { default: autocannon } = await import("autocannon");
  return new Promise((resolve, reject) => {
    autocannon({ url, connections: 32, duration: seconds, pipelining: 1 }, (err, result) => (err ? reject(err) : resolve(result.requests.average)));
  });
}

/** GET /api/version requests/s through lmd and through a bare node:http server, interleaved halves. */
export async function httpRps(root: string, lmdUrl: string, seconds: number): Promise<{ lmd: number; bare: number }> {
  const bare = fork(path.join(root, "dist/bench/bare-server.js"), [], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const port = await new Promise<number>((resolve) => bare.once("message", (m: { port: number }) => resolve(m.port)));
  const half = Math.max(1, Math.round(seconds / 2));
  const lmd = [await cannon(`${lmdUrl}/api/version`, half)];
  const b = [await cannon(`http://127.0.0.1:${port}/api/version`, half)];
  b.push(await cannon(`http://127.0.0.1:${port}/api/version`, half));
  lmd.push(await cannon(`${lmdUrl}/api/version`, half));
  bare.kill("SIGTERM");
  const mean = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;
  return { lmd: mean(lmd), bare: mean(b) };
}
