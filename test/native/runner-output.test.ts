/**
 * How the runner writes its output to the parent (src/runner/outbox.ts, through a real runner): a
 * job's first token at once, later ones gathered for SERVICE_STREAM_INTERVAL (the load spec's
 * streamIntervalMs) into one message, written right after the decode loop queues a step, while it
 * decodes, rather than between two steps. A step ends with each sequence sampling its token; the
 * next one starts once every sequence queued its next token, and a pipe write in between (0.2–0.5
 * ms on a 2-core VM when it wakes the parent) delayed every step. Not timing tests: they check
 * which messages carry which tokens and when the writes happen (test/helpers/runner-trace.mjs
 * marks each one).
 */
import t from "tap";
import { storyJob, tracedRunner, type Traced } from "../helpers/traced-runner.js";

t.test("output of several decoding sequences is written while the next step decodes", async (t) => {
  const { received, generate } = await tracedRunner(t, { sequences: 2 });
  const ended = await Promise.all([generate(1, storyJob(1)), generate(2, storyJob(2))]);
  t.ok(ended.every((m) => m.type === "done"), "both generations succeed", { ended });

  // The gathered writes in the middle of the streams: not a stream's first token (it goes at once)
  // and not what a job's end writes out just before its `done` (no step follows it).
  const output = received.filter((m) => m.type === "batch" || m.type === "chunk" || m.type === "done");
  const firsts = new Set([1, 2].map((id) => output.findIndex((m) => m.type === "chunk" && m.id === id)));
  const gathered = output.filter((m, i) => m.type !== "done" && !firsts.has(i) && output[i + 1]?.type !== "done");
  const during = gathered.filter((m) => m.decoding === true).length;
  const shown = output
    .map((m) => (m.type === "batch" ? `${m.messages.length}` : m.type === "chunk" ? "1" : "done") + (m.decoding ? "+" : m.type === "done" ? "" : "-"))
    .join(" ");
  t.ok(gathered.length >= 4, `output was gathered into several writes (${shown})`);
  t.equal(during, gathered.length, `each was written while a decode ran: ${during} of ${gathered.length} (${shown})`);
});

/** The output messages of job `id` in the order received, each as the number of tokens it carried. */
function outputOf(received: Traced[], id: number): number[] {
  return received.flatMap((m) => {
    if (m.type === "batch") {
      const mine = m.messages.filter((x) => "id" in x && x.id === id);
      return mine.length > 0 ? [mine.length] : [];
    }
    return (m.type === "chunk" || m.type === "thinking") && m.id === id ? [1] : [];
  });
}

t.test("SERVICE_STREAM_INTERVAL 0: each token is written at once, in a message of its own", async (t) => {
  const { received, generate } = await tracedRunner(t, { sequences: 1, streamIntervalMs: 0 });
  const ended = await generate(1, storyJob(1));
  t.equal(ended.type, "done", "the generation succeeds", { ended });
  const messages = outputOf(received, 1);
  t.ok(messages.length >= 40, `output was written (${messages.length} messages)`);
  t.ok(messages.every((n) => n === 1), "no message carries more than one token", { messages });
  t.notOk(received.some((m) => m.type === "batch"), "nothing is gathered into a batch");
});

t.test("a long SERVICE_STREAM_INTERVAL gathers a stream's tokens after its first, and ending the job writes what waits", async (t) => {
  // 48 tokens of the small model take far less than a second: everything after the first token waits
  // for the flush timer, and the job's end writes it out first.
  const { received, generate } = await tracedRunner(t, { sequences: 1, streamIntervalMs: 1000 });
  const ended = await generate(1, storyJob(1));
  t.equal(ended.type, "done", "the generation succeeds", { ended });
  const messages = outputOf(received, 1);
  const tokens = messages.reduce((a, b) => a + b, 0);
  t.ok(tokens >= 40, `output was written (${tokens} chunks)`);
  t.equal(messages[0], 1, "the first token goes at once, alone");
  t.ok(messages.length <= 3, `the rest came in few messages: ${JSON.stringify(messages)}`);
  const doneAt = received.findIndex((m) => m.type === "done" && m.id === 1);
  const lastOutputAt = received.findLastIndex(
    (m) => (m.type === "batch" && m.messages.some((x) => "id" in x && x.id === 1)) || (m.type === "chunk" && m.id === 1),
  );
  t.ok(lastOutputAt >= 0 && lastOutputAt < doneAt, "every token was written before the job's end");
});
