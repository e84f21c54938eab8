/**
 * The runner writes its output to the parent while the next decode step runs, not between two
 * steps (src/runner/child.ts, OUTPUT_DELAY_MS). A step ends with each sequence sampling its token;
 * the next one starts once every sequence queued its next token. A pipe write in between (0.2–0.5
 * ms on a 2-core VM when it wakes the parent) delayed every step: the gap between two decodes of 8
 * streams went from 1.8 to 0.9 ms when the writes moved into the decodes. And a fast stream's output
 * is gathered into about one message per 10 ms (OUTPUT_INTERVAL_MS): each message wakes the daemon
 * and then the client. Not timing tests of speed: they check when the writes happen
 * (test/helpers/runner-trace.mjs marks each one with whether a decode ran and the child's clock).
 */
import t from "tap";
import { storyJob, tracedRunner } from "../helpers/traced-runner.js";

t.test("output of several decoding sequences is written while the next step decodes", async (t) => {
  const { received, generate } = await tracedRunner(t, { sequences: 2 });
  const ended = await Promise.all([generate(1, storyJob(1, 96)), generate(2, storyJob(2, 96))]);
  t.ok(ended.every((m) => m.type === "done"), "both generations succeed", { ended });

  // The output messages (a chunk, or a batch of chunks) after each stream's first token, which goes
  // at once, and before the first stream ends: the output gathered when a job ends goes with its
  // `done`, whenever that is.
  const firstDone = received.findIndex((m) => m.type === "done");
  const output = received.slice(0, firstDone).filter((m) => m.type === "batch" || m.type === "chunk").slice(2);
  const chunks = output.reduce((n, m) => n + (m.type === "batch" ? m.messages.length : 1), 0);
  const during = output.filter((m) => m.decoding === true).length;
  t.ok(chunks >= 80, `output was written (${chunks} chunks in ${output.length} messages)`);
  // Written as a step's tokens arrive, none would be (the next decode starts after every sequence
  // queued its token); each waits OUTPUT_DELAY_MS, into the next decode. Node's timers fire up to a
  // millisecond early and the test model's steps are short, so some land in a gap all the same:
  // from 8 of 22 to 25 of 26 over a dozen runs here.
  t.ok(during >= (1 / 3) * output.length, `messages written during a decode: ${during} of ${output.length}`);
});

t.test("a fast single stream's output goes out about once per 10 ms, every token of it", async (t) => {
  // The small test model decodes a token in a few ms: written one message per token, each would wake
  // the daemon and then the client (src/runner/child.ts, OUTPUT_INTERVAL_MS).
  const { received, generate } = await tracedRunner(t, { sequences: 1 });
  const ended = await generate(1, storyJob(1, 96));
  t.equal(ended.type, "done", "the generation succeeds", { ended });
  const output = received.filter((m) => m.type === "chunk" || m.type === "batch");
  const chunks = output.reduce((n, m) => n + (m.type === "batch" ? m.messages.length : 1), 0);
  t.equal(chunks, ended.type === "done" ? ended.stats.evalCount : -1, `every token's chunk arrives (${chunks} chunks in ${output.length} messages)`);
  // The first chunk goes at once (time to first token), the next OUTPUT_DELAY_MS after it; from then
  // on a message waits for the interval since the one before. Node's timers run on the event loop's
  // clock, which can lag the real one by a moment: 8 ms leaves room for that.
  // The last message goes when the job ends (with its `done`), whenever that is.
  const gaps = output.slice(2, -1).map((m, i) => m.at! - output[i + 1]!.at!);
  t.ok(gaps.length > 0 && gaps.every((g) => g >= 8), `output messages at least 8 ms apart (shortest ${Math.min(...gaps).toFixed(2)} ms)`, { gaps });
});
