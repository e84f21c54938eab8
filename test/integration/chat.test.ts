/**
 * /api/chat on the real daemon and runner with a generated ChatML model: the chat template is
 * applied, the prompt cache carries over between turns, streaming and not, load/unload forms,
 * `format` by JSON Schema, `think`, and the request errors.
 */
import { Ajv } from "ajv";
import t from "tap";
import { assertError } from "../helpers/assert-error.js";
import { postJson, readNdjson, startDaemon } from "../helpers/daemon.js";

const greedy = { temperature: 0, seed: 7, num_predict: 8 };
const SYSTEM = "You are a terse assistant. Answer in one short sentence and never apologise.";

t.test("/api/chat", async (t) => {
  const { url, app } = await startDaemon(t, { models: [{ name: "chat", make: { preset: "tiny", chatTemplate: "chatml" } }] });
  const chat = async (body: Record<string, unknown>) => {
    const res = await postJson(`${url}/api/chat`, { model: "chat", stream: false, ...body });
    t.equal(res.status, 200, `status 200 for ${JSON.stringify(body).slice(0, 80)}`);
    return (await res.json()) as Record<string, unknown> & { message: { role: string; content: string }; prompt_eval_count: number };
  };

  t.test("the model's ChatML template is what the runner evaluates", async (t) => {
    // The same conversation written out by hand in ChatML and sent raw through /api/generate:
    // both requests start from a freshly loaded model (keep_alive 0), so nothing is cached.
    const rendered = `<|im_start|>system\n${SYSTEM}<|im_end|>\n<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n`;
    const raw = await postJson(`${url}/api/generate`, {
      model: "chat",
      prompt: rendered,
      raw: true,
      stream: false,
      keep_alive: 0,
      options: { ...greedy, num_predict: 1 },
    });
    const expected = ((await raw.json()) as { prompt_eval_count: number }).prompt_eval_count;
    const body = await chat({ messages: [{ role: "system", content: SYSTEM }, { role: "user", content: "Hello there" }], keep_alive: 0, options: greedy });
    t.equal(body.prompt_eval_count, expected, `chat evaluated the ChatML rendering (${expected} tokens)`);
    // Without the template's special tokens the same words are fewer tokens: the count tells them apart.
    const plainRes = await postJson(`${url}/api/generate`, {
      model: "chat",
      prompt: `${SYSTEM}\nHello there\n`,
      raw: true,
      stream: false,
      keep_alive: 0,
      options: { ...greedy, num_predict: 1 },
    });
    t.ok(((await plainRes.json()) as { prompt_eval_count: number }).prompt_eval_count < expected, "the template adds tokens");
    t.equal(body.message.role, "assistant");
    t.type(body.message.content, "string");
    t.equal(body.done, true);
    for (const k of ["total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration"]) {
      t.ok(Number.isInteger(body[k]) && (body[k] as number) >= 0, `${k} is a non-negative integer`);
    }
    t.ok((body.load_duration as number) > 0, "the model was loaded for this request");
    t.match(body.done_reason, /^(stop|length)$/);
  });

  t.test("the prompt cache carries over between turns", async (t) => {
    const first = [{ role: "system", content: SYSTEM }, { role: "user", content: "What is the capital of France?" }];
    const turn1 = await chat({ messages: first, options: greedy });
    const second = [...first, turn1.message, { role: "user", content: "And of Spain?" }];
    const cached = await chat({ messages: second, options: greedy });
    await chat({ messages: [], keep_alive: 0 }); // unload: the next turn starts from nothing
    const fresh = await chat({ messages: second, options: greedy });
    t.ok(cached.prompt_eval_count < fresh.prompt_eval_count, `turn 2 evaluated ${cached.prompt_eval_count} of ${fresh.prompt_eval_count} prompt tokens`);
    t.ok(fresh.prompt_eval_count - cached.prompt_eval_count >= turn1.prompt_eval_count - 1, "at least turn 1's prompt came from the cache");
    t.equal(cached.message.content, fresh.message.content, "the cache does not change the answer");
  });

  t.test("streaming NDJSON carries the same answer as stream:false", async (t) => {
    const messages = [{ role: "user", content: "Tell me about the sea" }];
    const whole = await chat({ messages, options: greedy });
    const res = await postJson(`${url}/api/chat`, { model: "chat", messages, options: greedy });
    t.equal(res.status, 200);
    t.match(res.headers.get("content-type"), /^application\/x-ndjson/);
    const lines = await readNdjson(res);
    const last = lines[lines.length - 1]!;
    t.ok(lines.length >= 2, "chunks, then the final object");
    for (const l of lines.slice(0, -1)) t.match(l, { model: "chat", done: false, message: { role: "assistant", content: String } });
    t.match(last, { done: true, done_reason: /^(stop|length)$/, message: { role: "assistant", content: "" }, eval_count: Number });
    const text = lines.slice(0, -1).map((l) => (l.message as { content: string }).content).join("");
    t.equal(text, whole.message.content, "the streamed text equals the whole answer");
  });

  t.test("load and unload forms", async (t) => {
    const loaded = await chat({ messages: [] });
    t.match(loaded, { model: "chat", done: true, done_reason: "load", message: { role: "assistant", content: "" } });
    t.equal(app.services.scheduler.list().length, 1, "loaded");
    const unloaded = await chat({ keep_alive: 0 });
    t.match(unloaded, { done: true, done_reason: "unload" });
    t.equal(app.services.scheduler.list().length, 0, "unloaded");
  });

  t.test("format: a JSON Schema constrains the answer", async (t) => {
    const schema = {
      type: "object",
      properties: { color: { enum: ["red", "green", "blue"] }, ok: { type: "boolean" }, size: { enum: ["small", "large"] } },
      required: ["color", "ok", "size"],
    };
    const body = await chat({
      messages: [{ role: "user", content: "Describe the sky as JSON" }],
      format: schema,
      options: { temperature: 0.9, seed: 3, num_predict: 200 },
    });
    t.equal(body.done_reason, "stop", "the grammar ended the answer");
    const answer = JSON.parse(body.message.content) as unknown;
    const validate = new Ajv().compile(schema);
    t.ok(validate(answer), `the answer validates against the schema: ${body.message.content}`);
  });

  t.test("think", async (t) => {
    await assertError(
      t,
      await postJson(`${url}/api/chat`, { model: "chat", messages: [{ role: "user", content: "hi" }], think: true }),
      400,
      '"chat" does not support thinking',
    );
    const body = await chat({ messages: [{ role: "user", content: "hi" }], think: false, options: greedy });
    t.equal(body.done, true, "think:false is accepted on any model");
  });

  t.test("request errors", async (t) => {
    await assertError(t, await postJson(`${url}/api/chat`, { messages: [] }), 400, "model is required");
    await assertError(
      t,
      await postJson(`${url}/api/chat`, { model: "nope", messages: [{ role: "user", content: "hi" }] }),
      404,
      "model 'nope' not found, try pulling it first",
    );
    await assertError(
      t,
      await postJson(`${url}/api/chat`, { model: "chat", messages: [{ role: "robot", content: "hi" }] }),
      400,
      "invalid value for parameter 'messages[0].role': expected one of system, user, assistant, tool",
    );
    await assertError(
      t,
      await postJson(`${url}/api/chat`, { model: "chat", messages: "hi" }),
      400,
      "invalid type for parameter 'messages': expected array or null",
    );
    await assertError(
      t,
      await postJson(`${url}/api/chat`, { model: "chat", messages: [{ role: "user", content: "hi" }], options: { temperature: 3 } }),
      400,
      "temperature must be between 0 and 2",
    );
    await assertError(
      t,
      await postJson(`${url}/api/chat`, { model: "chat", messages: [{ role: "user", content: "hi", images: ["aGk="] }] }),
      400,
      "model 'chat' does not support images",
    );
    await assertError(
      t,
      await postJson(`${url}/api/chat`, { model: "chat", messages: [{ role: "user", content: "hi" }], format: 5 }),
      400,
      "invalid type for parameter 'format': expected string or object",
    );
    await assertError(
      t,
      await postJson(`${url}/api/chat`, { model: "chat", messages: [{ role: "user", content: "hi" }], format: "yaml" }),
      400,
      `invalid value for parameter 'format': expected "json" or a JSON schema`,
    );
  });
});
