/**
 * Work for one request does not take a model's runner from others (src/runner/client.ts,
 * runner/render-budget.ts, runner/child/chat.ts, template/history.ts), on the real daemon and runner:
 * - SERVICE_RENDER_TIMEOUT times the chat template's render from when the runner starts it, so
 *   a bystander's stream completes while another client's 1 MiB `/v1/messages/count_tokens` (and
 *   a streamed `/v1/responses` with 1 MiB of input) is tokenized;
 * - chat truncation finds how many messages to drop by a search: 8 × the messages cost far less
 *   than the 64 × a drop-one-at-a-time loop took (only a ratio measured in one run is asserted).
 */
import t from "tap";
import { postJson, readLines, startDaemon } from "../helpers/daemon.js";

const MiB = 1024 * 1024;
const emoji = (bytes: number) => "\u{1F600}".repeat(bytes / 4);

interface Bystander {
  lines: Record<string, unknown>[];
  /** Resolves at the stream's first line. */
  first: Promise<void>;
  /** Resolves at the stream's end. */
  done: Promise<void>;
}

/** A streamed chat that must run to its end, read line by line. */
async function bystander(url: string): Promise<Bystander> {
  let seen!: () => void;
  const first = new Promise<void>((resolve) => (seen = resolve));
  const res = await postJson(`${url}/api/chat`, {
    model: "tiny",
    messages: [{ role: "user", content: "tell me a long story" }],
    options: { num_predict: 300, temperature: 0 },
  });
  const lines: Record<string, unknown>[] = [];
  const done = readLines(res, (line) => {
    lines.push(line);
    seen();
  }).finally(() => seen());
  return { lines, first, done };
}

t.test("a bystander's stream completes while another client's 1 MiB prompt is tokenized", async (t) => {
  const { url } = await startDaemon(t, { env: { SERVICE_RENDER_TIMEOUT: "2s", SERVICE_NUM_PARALLEL: "2" } });
  t.equal(
    (await postJson(`${url}/api/chat`, { model: "tiny", messages: [{ role: "user", content: "hi" }], stream: false, options: { num_predict: 1 } })).status,
    200,
    "the model is loaded",
  );

  const cases: [string, () => Promise<Response>][] = [
    ["/v1/messages/count_tokens", () => postJson(`${url}/v1/messages/count_tokens`, { model: "tiny", messages: [{ role: "user", content: emoji(MiB) }] })],
    ["streamed /v1/responses", () => postJson(`${url}/v1/responses`, { model: "tiny", input: emoji(MiB), stream: true, max_output_tokens: 2 })],
  ];
  for (const [name, heavy] of cases) {
    const other = await bystander(url);
    await other.first;
    const res = await heavy();
    const text = await res.text();
    t.equal(res.status, 200, `${name}: answered 200`);
    if (name.includes("count_tokens")) t.ok(((JSON.parse(text) as { input_tokens: number }).input_tokens ?? 0) > MiB, `${name}: every emoji counted`);
    else t.notMatch(text, /event: error|"type":"error"/, `${name}: no error in the stream`);
    await other.done;
    const last = other.lines.at(-1) ?? {};
    t.equal(other.lines.some((l) => "error" in l), false, `${name}: the bystander's stream has no error`);
    t.equal(last.done, true, `${name}: the bystander's stream ran to its end (${other.lines.length} lines)`);
  }
});

t.test("chat truncation is a search, not a loop of re-tokenizations", async (t) => {
  const models = [{ name: "tiny" }, { name: "tpl", install: { template: "{{ range .Messages }}<{{ .Role }}>{{ .Content }}\n{{ end }}<assistant>" } }];
  const { url } = await startDaemon(t, { models, env: { SERVICE_CONTEXT_LENGTH: "256" } });
  const history = (n: number) => [
    ...Array.from({ length: n - 1 }, (_, i) => ({ role: i % 2 === 0 ? "user" : "assistant", content: `message number ${i} about alpha beta gamma` })),
    { role: "user", content: "last question" },
  ];
  for (const model of ["tpl", "tiny"]) {
    const chat = async (n: number) => {
      const t0 = performance.now();
      const res = await postJson(
        `${url}/api/chat`,
        { model, messages: history(n), stream: false, options: { num_predict: 1, num_ctx: 256 } },
        { signal: AbortSignal.timeout(600_000) },
      );
      const body = (await res.json()) as { truncated_tokens: number };
      t.equal(res.status, 200, `${model}, ${n} messages: served`);
      t.ok(body.truncated_tokens > 0, `${model}, ${n} messages: old ones dropped`);
      return performance.now() - t0;
    };
    await chat(50);
    const small = Math.min(await chat(250), await chat(250));
    const large = Math.min(await chat(2000), await chat(2000));
    t.ok(
      large / small < 24,
      `${model}: 8 × the messages cost ${(large / small).toFixed(1)} × the time (${Math.round(small)} → ${Math.round(large)} ms; dropping one at a time: ~64 ×)`,
    );
  }
});
