/**
 * The runner writes its output to the parent while the next decode step runs, not between two
 * steps (src/runner/child.ts, OUTPUT_DELAY_MS). A step ends with each sequence sampling its token;
 * the next one starts once every sequence queued its next token. A pipe write in between (0.2–0.5
 * ms on a 2-core VM when it wakes the parent) delayed every step: the gap between two decodes of 8
 * streams went from 1.8 to 0.9 ms when the writes moved into the decodes. Not a timing test: it
 * checks when the writes happen (test/helpers/runner-trace.mjs marks each one).
 */
import t from "tap";
import { storyJob, tracedRunner } from "../helpers/traced-runner.js";

t.test("output of several decoding sequences is written while the next step decodes", async (t) => {
  const { received, generate } = await tracedRunner(t, { sequences: 2 });
  const ended = await Promise.all([generate(1, storyJob(1)), generate(2, storyJob(2))]);
  t.ok(ended.every((m) => m.type === "done"), "both generations succeed", { ended });

  // Each token's chunk, and whether the message that carried it was written during a decode.
  const chunks = received.flatMap((m) => (m.type === "batch" ? m.messages.map(() => m.decoding) : m.type === "chunk" ? [m.decoding] : []));
  const during = chunks.filter((d) => d === true).length;
  t.ok(chunks.length >= 40, `output was written (${chunks.length} chunks)`);
  // A stream's first token goes at once, its last has no next step to overlap with, and a slow
  // moment may split a step's output: most, not all, are written during a decode.
  t.ok(during >= 0.8 * chunks.length, `tokens written during a decode: ${during} of ${chunks.length}`);
});
