/**
 * A real runner child with test/helpers/runner-trace.mjs preloaded, the small test model loaded
 * with `sequences` sequences, and every message it sent. Forked directly, not as the daemon forks
 * a runner (Runner.start): no threadpool library is preloaded.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Test } from "tap";
import { childEntry } from "../../src/runner/spawn.js";
import type { FromRunner } from "../../src/runner/protocol.js";
import type { GenerateJob } from "../../src/runner/types.js";
import { testGguf } from "./models.js";

/** A message as the trace marks it: output with `decoding`, `done` with `sampled`. */
export type Traced = FromRunner & { decoding?: boolean; sampled?: { total: number; duringDecode: number } };

/** A job's last message. */
export type Ended = Extract<Traced, { type: "done" } | { type: "failed" }>;

export interface TracedRunner {
  received: Traced[];
  /** Sends a generate job and resolves with its `done` or `failed` message. */
  generate(id: number, job: GenerateJob): Promise<Ended>;
}

/** Forks and loads; `uvThreads` is the child's UV_THREADPOOL_SIZE (a runner always has "1"); `streamIntervalMs` as in the load spec. */
export async function tracedRunner(
  t: Test,
  { sequences, threads = 1, uvThreads = "1", streamIntervalMs }: { sequences: number; threads?: number; uvThreads?: string; streamIntervalMs?: number },
): Promise<TracedRunner> {
  const file = await testGguf({ preset: "small" });
  const child = fork(childEntry(), [], {
    execArgv: ["--import", fileURLToPath(new URL("runner-trace.mjs", import.meta.url))],
    env: { ...process.env, UV_THREADPOOL_SIZE: uvThreads },
  });
  t.teardown(() => child.kill("SIGKILL"));
  const received: Traced[] = [];
  const waiters: (() => void)[] = [];
  child.on("message", (msg: Traced) => {
    if (msg.type === "estimate") child.send({ type: "admit" });
    received.push(msg);
    for (const w of waiters.splice(0)) w();
  });
  const until = async (done: () => boolean): Promise<void> => {
    while (!done()) await new Promise<void>((r) => waiters.push(r));
  };
  child.send({
    type: "load",
    spec: { path: file, contextSize: 1024, sequences, threads, gpu: false, ...(streamIntervalMs !== undefined ? { streamIntervalMs } : {}) },
  });
  await until(() => received.some((m) => m.type === "loaded" || m.type === "load-failed"));
  t.ok(received.some((m) => m.type === "loaded"), "the model loads", { received });
  const ended = (id: number) => received.find((m): m is Ended => (m.type === "done" || m.type === "failed") && m.id === id);
  return {
    received,
    generate: async (id, job) => {
      child.send({ type: "generate", id, job });
      await until(() => ended(id) !== undefined);
      return ended(id)!;
    },
  };
}

/** A story of `maxTokens` tokens, sampled with a seed. */
export function storyJob(seed: number, maxTokens = 48): GenerateJob {
  const job = greedyJob(`story ${seed}: once upon a time`, maxTokens);
  return { ...job, sampling: { ...job.sampling, temperature: 0.8, seed } };
}

/** `maxTokens` tokens of `text`, greedy. */
export const greedyJob = (text: string, maxTokens: number): GenerateJob => ({
  prompt: { kind: "text", text },
  sampling: {
    temperature: 0,
    topK: 40,
    topP: 0.9,
    minP: 0,
    seed: 1,
    repeatPenalty: 1,
    repeatLastN: 64,
    presencePenalty: 0,
    frequencyPenalty: 0,
    penalizeNewline: true,
  },
  maxTokens,
  stop: [],
});
