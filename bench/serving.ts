/**
 * The serving figures of `npm run bench`: aggregate decode of 4 and 8 concurrent
 * streams against llama-server `-np 4`/`-np 8`, the time to first token of a new request while
 * others stream, decode on a busy host (a CPU hog pinned to one core) for each thread count and
 * for lmd's automatic choice, and speculative decoding with the identity-layer pair and an
 * unrelated draft. Each figure is measured in interleaved rounds.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { makeModel, type MakeModelOptions } from "../src/gguf/make-model.js";
import type { DecodeResult } from "./direct.js";
import { lmdDecode, lmdGenerate, type Sampling } from "./http.js";
import { completionBody, llamaServerComplete } from "./llama-server.js";
import { track } from "./procs.js";

export type Stream = DecodeResult["streams"][number];
export type ServerKind = "lmd" | "llama-server";

/**
 * Tokens after each stream's first, over the span in which they were decoded (all streams). Every
 * stream must have generated the `asked` tokens: decoding slows as a context grows, so a stream that
 * ended early at an end-of-sequence token would be compared on less work than its counterpart.
 */
export function aggregateRate(streams: Stream[], asked: number): number {
  const short = streams.find((s) => s.tokens !== asked);
  if (short) throw new Error(`a stream generated ${short.tokens} of ${asked} tokens (an end of sequence?): its rate would compare unequal work`);
  const total = streams.reduce((n, s) => n + s.tokens, 0);
  const start = Math.min(...streams.map((s) => s.firstMs));
  const end = Math.max(...streams.map((s) => s.lastMs));
  return (total - streams.length) / ((end - start) / 1000);
}

/** `n` concurrent streamed completions on llama-server, timed like lmdDecode's. */
export async function llamaServerStreams(url: string, prompt: string, tokens: number, n: number, s: Sampling): Promise<Stream[]> {
  const t0 = performance.now();
  return Promise.all(Array.from({ length: n }, async (_, i) => {
    const c = await llamaServerComplete(url, completionBody(`${i} ${prompt}`, tokens, s, { ignore_eos: true }));
    return { tokens: c.predicted, firstMs: c.first - t0, lastMs: c.last - t0 };
  }));
}

/** A prompt of about `n` tokens, different for each `salt` so nothing is served from a prompt cache. */
export const prose = (n: number, salt: number): string => {
  const words = "the river ran past the old mill where a miller and his daughter kept bread and stories for travellers".split(" ");
  return `${salt} ` + Array.from({ length: Math.round(n * 0.95) }, (_, i) => words[(i * 7 + salt) % words.length]).join(" ");
};

/** One long streamed generation on either server, ended by `signal`; `onToken` per token line. */
async function longStream(kind: ServerKind, url: string, prompt: string, s: Sampling, signal: AbortSignal, onToken: () => void): Promise<void> {
  if (kind === "llama-server") {
    await llamaServerComplete(url, completionBody(prompt, 3000, s, { ignore_eos: true }), signal, onToken);
    return;
  }
  const res = await fetch(`${url}/api/generate`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    signal,
    body: JSON.stringify({ model: "bench", prompt, raw: true, stream: true, options: { ...s, num_predict: 3000 } }),
  });
  if (!res.ok || !res.body) throw new Error(`lmd answered ${res.status}`);
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) for (const byte of chunk) if (byte === 10) onToken();
}

/**
 * `n` streams that keep decoding until stopped: the "others" of the TTFT-under-load figure. A
 * stream that ends by itself (an end-of-sequence token: lmd has no ignore_eos) is restarted.
 */
export function backgroundStreams(
  kind: ServerKind,
  url: string,
  n: number,
  s: Sampling,
  salt: number,
): { ready: Promise<void>; stopped(): boolean; stop(): Promise<void> } {
  const ac = new AbortController();
  const seen = new Array<number>(n).fill(0);
  let markReady!: () => void;
  const ready = new Promise<void>((r) => (markReady = r));
  const onToken = (i: number) => () => {
    seen[i]! += 1;
    if (seen.every((c) => c >= 2)) markReady();
  };
  const loops = Array.from({ length: n }, async (_, i) => {
    for (let k = 0; !ac.signal.aborted; k++) {
      await longStream(kind, url, prose(16, salt * 100 + i * 10 + k), s, ac.signal, onToken(i)).catch((err: unknown) => {
        if (!ac.signal.aborted) throw err;
      });
    }
  });
  const failed = Promise.all(loops).then(() => undefined);
  return {
    ready: Promise.race([ready, failed.then(() => { throw new Error("background streams ended before they started"); })]),
    stopped: () => ac.signal.aborted,
    async stop() {
      ac.abort();
      await failed;
      // Let the servers notice the closed connections and free the slots before the next figure.
      await new Promise((r) => setTimeout(r, 500));
    },
  };
}

/** Time to first token of a fresh ~64-token prompt (one token predicted), on either server. */
export async function probeTtft(kind: ServerKind, url: string, s: Sampling, salt: number): Promise<number> {
  const prompt = prose(64, 50_000 + salt);
  if (kind === "llama-server") return (await llamaServerComplete(url, completionBody(prompt, 1, s))).ttftMs;
  return (await lmdGenerate(url, { model: "bench", prompt, raw: true, stream: true, options: { ...s, num_predict: 1 } })).ttftMs;
}

/** A busy loop pinned to CPU 0: another tenant of the host. Bounded by its own deadline; killed by the caller. */
export function startHog(seconds: number): ChildProcess {
  return track(
    spawn("taskset", ["-c", "0", process.execPath, "-e", `const end = Date.now() + ${seconds * 1000}; while (Date.now() < end);`], { stdio: "ignore" }),
  );
}

/** Stops a hog and waits until it is gone, so the next "quiet" figure is quiet. */
export async function stopHog(hog: ChildProcess): Promise<void> {
  if (hog.exitCode !== null || hog.signalCode !== null) return;
  const gone = new Promise((r) => hog.once("exit", r));
  hog.kill("SIGKILL");
  await gone;
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
  return aggregateRate((await lmdDecode(url, `Once upon a time ${salt}`, tokens, 1, s, model)).streams, tokens);
}

export interface SpeculativeRun {
  rate: number;
  drafted: number;
  accepted: number;
  context: number[];
}

/** A greedy generation with its decode rate and draft counts. */
export async function speculativeRun(url: string, model: string, tokens: number, salt: number): Promise<SpeculativeRun> {
  const g = await lmdGenerate(url, {
    model,
    prompt: `${salt} the quick brown fox jumps over the lazy dog`,
    raw: true,
    stream: true,
    options: { temperature: 0, repeat_penalty: 1, num_predict: tokens },
  });
  return { rate: (g.evalCount - 1) / ((g.lastMs - g.firstMs) / 1000), drafted: g.draftCount ?? 0, accepted: g.draftAcceptedCount ?? 0, context: g.context };
}

/** Cores this machine has for the busy-host table (1..cores). */
export const cores = () => Math.max(1, os.availableParallelism());
