/**
 * The serving figures of `npm run bench` (issue 15): aggregate decode of 4 and 8 concurrent
 * streams against llama-server `-np 4`/`-np 8`, decode on a busy host (a CPU hog pinned to one
 * core) for each thread count and for lmd's automatic choice, and speculative decoding with the
 * identity-layer pair and an unrelated draft. Each figure is measured in interleaved rounds.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { makeModel, type MakeModelOptions } from "../src/gguf/make-model.js";
import type { DecodeResult } from "./direct.js";
import { lmdDecode, lmdGenerate, type Sampling } from "./http.js";

export type Stream = DecodeResult["streams"][number];

/** Tokens after each stream's first, over the span in which they were decoded (all streams). */
export function aggregateRate(streams: Stream[]): number {
  const total = streams.reduce((n, s) => n + s.tokens, 0);
  const start = Math.min(...streams.map((s) => s.firstMs));
  const end = Math.max(...streams.map((s) => s.lastMs));
  return (total - streams.length) / ((end - start) / 1000);
}

/** `n` concurrent streamed completions on llama-server, timed like lmdDecode's. */
export async function llamaServerStreams(url: string, prompt: string, tokens: number, n: number, s: Sampling): Promise<Stream[]> {
  const t0 = performance.now();
  return Promise.all(Array.from({ length: n }, async (_, i) => {
    const body = { prompt: `${i} ${prompt}`, n_predict: tokens, stream: true, cache_prompt: false, temperature: s.temperature, top_k: s.top_k, top_p: s.top_p, min_p: s.min_p, seed: s.seed, repeat_penalty: s.repeat_penalty, ignore_eos: true };
    const res = await fetch(`${url}/completion`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    if (!res.ok || !res.body) throw new Error(`llama-server answered ${res.status}`);
    const decoder = new TextDecoder();
    let buf = "";
    let first = 0;
    let last = 0;
    let count = 0;
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      let j: number;
      while ((j = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, j).trim();
        buf = buf.slice(j + 1);
        if (!line.startsWith("data: ")) continue;
        const data = JSON.parse(line.slice(6)) as { stop?: boolean; timings?: { predicted_n: number } };
        if (data.stop) count = data.timings?.predicted_n ?? count;
        else {
          const now = performance.now() - t0;
          if (!first) first = now;
          last = now;
        }
      }
    }
    return { tokens: count, firstMs: first, lastMs: last };
  }));
}

/** A bounded busy loop pinned to CPU 0: another tenant of the host. Killed by the caller (and by its own deadline). */
export function startHog(seconds: number): ChildProcess {
  return spawn("taskset", ["-c", "0", process.execPath, "-e", `const end = Date.now() + ${seconds * 1000}; while (Date.now() < end);`], { stdio: "ignore" });
}

/** Writes a make-model file into the cache once. */
export async function cachedModel(cache: string, name: string, options: MakeModelOptions): Promise<string> {
  const file = path.join(cache, `${name}.gguf`);
  if (!existsSync(file)) {
    process.stderr.write(`writing ${file}\n`);
    await makeModel(file, options);
  }
  return file;
}

/** Single-stream decode through lmd (tokens/s after the first token). */
export async function lmdSingle(url: string, model: string, tokens: number, s: Sampling, salt: number): Promise<number> {
  return aggregateRate((await lmdDecode(url, `Once upon a time ${salt}`, tokens, 1, s, model)).streams);
}

export interface SpeculativeRun {
  rate: number;
  drafted: number;
  accepted: number;
  context: number[];
}

/** A greedy generation with its decode rate and draft counts. */
export async function speculativeRun(url: string, model: string, tokens: number, salt: number): Promise<SpeculativeRun> {
  const g = await lmdGenerate(url, { model, prompt: `${salt} the quick brown fox jumps over the lazy dog`, raw: true, stream: true, options: { temperature: 0, repeat_penalty: 1, num_predict: tokens } });
  return { rate: (g.evalCount - 1) / ((g.lastMs - g.firstMs) / 1000), drafted: g.draftCount ?? 0, accepted: g.draftAcceptedCount ?? 0, context: g.context };
}

/** Cores this machine has for the busy-host table (1..cores). */
export const cores = () => Math.max(1, os.availableParallelism());
