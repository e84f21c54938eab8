/**
 * A running stream keeps producing tokens while a long prompt is prefilled beside it on the same
 * model (src/runner/step-select.ts: a prompt longer than the batch is decoded a batch at a
 * time, and every step also carries each running generation's next token). A runner that decoded
 * the whole prompt first would leave the stream silent from the prompt's first batch to its first
 * token. Not a timing test: it counts the stream's tokens that arrive between sending the long
 * request and its first token. The prompt (token ids, so nothing long is tokenized) takes one
 * step per token (`num_batch` 2: one prompt token and the stream's token a step), each of which
 * gives the stream one token. The request's way into the runner gives the stream tokens too, but
 * far fewer than the prompt has even on a loaded host (a decode loop that put the prompt first
 * fails this test), so a count of half the prompt's steps means the stream was decoded during the
 * prefill.
 */
import t from "tap";
import { postJson, readLines, startDaemon } from "../helpers/daemon.js";

t.test("a stream's tokens keep coming while a long prompt is prefilled beside it", async (t) => {
  const batch = 2;
  const { url } = await startDaemon(t, {
    // Each token written as soon as it is sampled (no gathering), so the stream's lines show each step;
    // no saved prompt prefixes (another run's would spare the long prompt its prefill).
    env: { SERVICE_NUM_PARALLEL: "2", SERVICE_CONTEXT_LENGTH: "4096", SERVICE_MAX_PREDICT: "1000000", SERVICE_KEEP_ALIVE: "-1", SERVICE_CACHE_MAX: "0" },
    // Greedy decoding of a text-only model never ends by itself: the stream runs until it is stopped.
    models: [{ name: "tiny", make: { preset: "tiny", contextLength: 4096, textOnly: true }, install: { params: { num_batch: batch } } }],
  });
  t.equal(
    (await postJson(`${url}/api/generate`, { model: "tiny", prompt: "warm up", stream: false, options: { num_predict: 1 } })).status,
    200,
    "the model is loaded",
  );

  const events: string[] = [];
  const stop = new AbortController();
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  let aTokens = 0;
  const a = postJson(
    `${url}/api/generate`,
    { model: "tiny", prompt: "once upon a time", raw: true, options: { num_predict: -1, temperature: 0 } },
    { signal: stop.signal },
  )
    .then((res) =>
      readLines(res, (line) => {
        if (line.done) events.push("a-done");
        else if (++aTokens >= 8) {
          events.push("a");
          started();
        }
      }),
    )
    .catch((err: unknown) => {
      if (!stop.signal.aborted) throw err;
    });
  await running;

  // Token ids (`context`): the request reaches the runner without a long text to tokenize.
  const ids = Array.from({ length: 3500 }, (_, i) => 300 + ((i * 37) % 3000));
  let bFinal: Record<string, unknown> = {};
  events.push("b-sent");
  const res = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "and", context: ids, raw: true, options: { num_predict: 1, temperature: 0 } });
  t.equal(res.status, 200, "the long request is answered");
  await readLines(res, (line) => {
    if (line.done) bFinal = line;
    else events.push("b-first");
  });
  // The stream goes on after the long request's first token: it was running all along.
  const after = aTokens;
  for (let i = 0; i < 500 && aTokens < after + 4; i++) await new Promise((r) => setTimeout(r, 10));
  stop.abort();
  await a;

  const promptTokens = Number(bFinal.prompt_eval_count);
  const batches = Math.ceil(promptTokens / (batch - 1));
  t.ok(promptTokens >= 3500, `the long prompt has ${promptTokens} tokens: ${batches} batches of ${batch} beside the stream's token`);
  const sent = events.indexOf("b-sent");
  const first = events.indexOf("b-first");
  t.ok(sent >= 0 && first > sent, "the long request's first token came after it was sent");
  t.notOk(events.includes("a-done"), "the stream did not end before it was stopped");
  const during = events.slice(sent, first).filter((e) => e === "a").length;
  t.ok(during >= batches / 2, `the stream got ${during} tokens between the long request and its first token (at least half of its ${batches} batches)`);
  t.ok(events.slice(first).includes("a"), "and went on after it");
});
