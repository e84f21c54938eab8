/**
 * A completion's sink that throws (src/runner/client.ts): the sink's callbacks run inside the
 * child's IPC message listener, so a throw there escaped as an uncaught exception and the job's
 * promise never settled (the scheduler's lease on the runner was then never given back). The job
 * now fails with the sink's error once the child, told to cancel it, ended it; the runner takes the next job.
 */
import { pino } from "pino";
import t from "tap";
import { Runner } from "../../src/runner/client.js";
import type { ChatJob, GenerateJob, LoadSpec } from "../../src/runner/types.js";
import { testGguf } from "../helpers/models.js";
import { greedyJob } from "../helpers/traced-runner.js";

const job: GenerateJob = greedyJob("Once upon a time", 300);

t.test("a sink whose onText throws fails its job, which the child cancels", async (t) => {
  const log = pino({ level: "silent" });
  const spec: LoadSpec = { path: await testGguf({ preset: "tiny" }), contextSize: 512, sequences: 1, threads: 1, gpu: false };
  const runner = await Runner.start(spec, { name: "tiny", log, loadTimeoutMs: 60_000 });
  t.teardown(() => runner.stop());
  const evals: number[] = [];
  runner.onStats = (stats) => void evals.push(stats.evalCount);

  const full = await runner.complete({ kind: "generate", job }, { onText: () => undefined });
  let calls = 0;
  const failing = runner.complete({ kind: "generate", job }, {
    onText: () => {
      calls++;
      throw new Error("the route's callback failed");
    },
  });
  await t.rejects(failing, { message: "the route's callback failed" });
  t.equal(calls, 1, "no output reaches the sink after it threw");

  // The failed job settled only once the child ended it: its slot is free for the next one.
  const after = await runner.complete({ kind: "generate", job }, { onText: () => undefined });
  t.equal(after.evalCount, full.evalCount, "the next job runs as before");
  t.equal(evals.length, 3, "the child reported the end of every job");
});

t.test("a sink whose onToolCalls throws fails its chat job; the runner takes the next one", async (t) => {
  const log = pino({ level: "silent" });
  const path = await testGguf({ preset: "tiny", chatTemplate: "chatml-tools" });
  const runner = await Runner.start({ path, contextSize: 1024, sequences: 1, threads: 1, gpu: false }, { name: "chat", log, loadTimeoutMs: 60_000 });
  t.teardown(() => runner.stop());
  // A model with random weights calls a tool only when made to (`required`); the enum keeps the call short.
  const chat: ChatJob = {
    turns: [{ role: "user", content: "What is the weather in Paris?" }],
    sampling: { ...job.sampling, temperature: 0.7, seed: 11 },
    maxTokens: 60,
    stop: [],
    tools: [{ name: "get_weather", parameters: { type: "object", properties: { city: { enum: ["Paris", "Tokyo"] } }, required: ["city"] } }],
    toolChoice: "required",
  };
  const calls: unknown[] = [];
  await runner.complete({ kind: "chat", job: chat }, { onText: () => undefined, onToolCalls: (c) => void calls.push(...c) });
  t.equal(calls.length > 0, true, "the job makes a tool call");

  const failing = runner.complete({ kind: "chat", job: chat }, {
    onText: () => undefined,
    onToolCalls: () => {
      throw new Error("the route's callback failed");
    },
  });
  await t.rejects(failing, { message: "the route's callback failed" });
  const after = await runner.complete({ kind: "chat", job: chat }, { onText: () => undefined });
  t.equal(after.doneReason === "cancelled", false, "the next job runs to its end");
});
