/**
 * The runner writes its output to the parent while the next decode step runs, not between two
 * steps (src/runner/child.ts, OUTPUT_DELAY_MS). A step ends with each sequence sampling its token;
 * the next one starts once every sequence queued its next token. A pipe write in between (0.2–0.5
 * ms on a 2-core VM when it wakes the parent) delayed every step: the gap between two decodes of 8
 * streams went from 1.8 to 0.9 ms when the writes moved into the decodes. Not a timing test: it
 * checks when the writes happen (test/helpers/runner-trace.mjs marks each one).
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import t from "tap";
import { childEntry } from "../../src/runner/client.js";
import type { FromRunner, GenerateJob } from "../../src/runner/protocol.js";
import { testGguf } from "../helpers/models.js";

type Traced = FromRunner & { decoding?: boolean };

t.test("output of several decoding sequences is written while the next step decodes", async (t) => {
  const file = await testGguf({ preset: "small" });
  const child = fork(childEntry(), [], { execArgv: ["--import", fileURLToPath(new URL("../helpers/runner-trace.mjs", import.meta.url))], env: { ...process.env, UV_THREADPOOL_SIZE: "1" } });
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
  child.send({ type: "load", spec: { path: file, contextSize: 1024, sequences: 2, threads: 1, gpu: false } });
  await until(() => received.some((m) => m.type === "loaded" || m.type === "load-failed"));
  t.ok(received.some((m) => m.type === "loaded"), "the model loads", { received });

  const job = (seed: number): GenerateJob => ({
    prompt: { kind: "text", text: `story ${seed}: once upon a time` },
    sampling: { temperature: 0.8, topK: 40, topP: 0.9, minP: 0, seed, repeatPenalty: 1, repeatLastN: 64, presencePenalty: 0, frequencyPenalty: 0, penalizeNewline: true },
    maxTokens: 48,
    stop: [],
  });
  child.send({ type: "generate", id: 1, job: job(1) });
  child.send({ type: "generate", id: 2, job: job(2) });
  await until(() => received.filter((m) => m.type === "done" || m.type === "failed").length === 2);
  t.same(received.filter((m) => m.type === "failed"), [], "both generations succeed");

  // Each token's chunk, and whether the message that carried it was written during a decode.
  const chunks = received.flatMap((m) => (m.type === "batch" ? m.messages.map(() => m.decoding) : m.type === "chunk" ? [m.decoding] : []));
  const during = chunks.filter((d) => d === true).length;
  t.ok(chunks.length >= 40, `output was written (${chunks.length} chunks)`);
  // A stream's first token goes at once, its last has no next step to overlap with, and a slow
  // moment may split a step's output: most, not all, are written during a decode.
  t.ok(during >= 0.8 * chunks.length, `tokens written during a decode: ${during} of ${chunks.length}`);
});
