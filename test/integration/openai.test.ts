/**
 * The OpenAI-compatible /v1 API on the real daemon and runner, over raw HTTP: the exact SSE
 * framing, usage, response formats, completions, embeddings, models, and errors in the
 * contract's `{"error": string}` shape with their real statuses.
 */
import { Ajv } from "ajv";
import t, { type Test } from "tap";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";

const greedy = { temperature: 0, seed: 5, max_tokens: 8 };

/** The `data:` payloads of an SSE body, in order. */
async function sseEvents(t: Test, res: Response): Promise<string[]> {
  const text = await res.text();
  t.ok(text.endsWith("data: [DONE]\n\n"), "the stream ends with data: [DONE]");
  return text.split("\n\n").filter((e) => e !== "").map((e) => {
    t.match(e, /^data: /, "every event is a data: line");
    return e.slice("data: ".length);
  });
}

t.test("/v1", async (t) => {
  const { url } = await startDaemon(t, {
    models: [
      { name: "chat", make: { preset: "tiny", chatTemplate: "chatml" } },
      { name: "hf.co/someone/chat-model:Q8_0", make: { preset: "tiny", chatTemplate: "chatml" } },
    ],
  });
  const v1 = (path: string, body: unknown) => postJson(`${url}/v1/${path}`, body);

  t.test("chat/completions, not streamed", async (t) => {
    const res = await v1("chat/completions", {
      model: "chat",
      messages: [
        { role: "developer", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: "Hi" }] },
      ],
      ...greedy,
    });
    t.equal(res.status, 200);
    const body = (await res.json()) as Record<string, unknown> & { usage: Record<string, number> };
    t.match(body, {
      id: /^chatcmpl-/,
      object: "chat.completion",
      created: Number,
      model: "chat",
      choices: [{ index: 0, message: { role: "assistant", content: String }, finish_reason: /^(stop|length)$/ }],
      usage: { prompt_tokens: Number, completion_tokens: Number, total_tokens: Number },
    });
    t.equal(body.usage.total_tokens, body.usage.prompt_tokens + body.usage.completion_tokens);
    t.ok(body.usage.completion_tokens > 0 && body.usage.completion_tokens <= 8, "max_tokens bounds the answer");
  });

  t.test("chat/completions: the fields SDKs write as null when unset", async (t) => {
    const res = await v1("chat/completions", {
      model: "chat",
      messages: [{ role: "user", content: "Hi", name: null, tool_call_id: null }],
      tool_choice: null,
      tools: null,
      response_format: null,
      ...greedy,
    });
    t.equal(res.status, 200, await res.clone().text());
  });

  t.test("chat/completions, streamed as SSE with usage", async (t) => {
    const messages = [{ role: "user", content: "Tell me a story" }];
    const whole = (await (await v1("chat/completions", { model: "chat", messages, ...greedy })).json()) as { choices: { message: { content: string } }[] };
    const res = await v1("chat/completions", { model: "chat", messages, ...greedy, stream: true, stream_options: { include_usage: true } });
    t.equal(res.status, 200);
    t.match(res.headers.get("content-type"), /^text\/event-stream/);
    const events = await sseEvents(t, res);
    t.equal(events.pop(), "[DONE]");
    const chunks = events.map(
      (e) => JSON.parse(e) as { object: string; choices: { delta: { content?: string }; finish_reason: string | null }[]; usage?: unknown },
    );
    const usage = chunks.pop()!;
    t.match(usage, { object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: Number, completion_tokens: Number } });
    const final = chunks.pop()!;
    t.match(final.choices[0], { delta: {}, finish_reason: /^(stop|length)$/ });
    for (const c of chunks) t.match(c, { object: "chat.completion.chunk", choices: [{ finish_reason: null }] });
    t.equal(chunks.map((c) => c.choices[0]?.delta.content ?? "").join(""), whole.choices[0]?.message.content, "the deltas add up to the whole answer");
  });

  t.test("response_format json_schema", async (t) => {
    const schema = { type: "object", properties: { answer: { enum: ["yes", "no"] }, sure: { type: "boolean" } }, required: ["answer", "sure"] };
    const res = await v1("chat/completions", {
      model: "chat",
      messages: [{ role: "user", content: "Is it raining?" }],
      response_format: { type: "json_schema", json_schema: { name: "reply", schema } },
      temperature: 0.8,
      seed: 2,
      max_tokens: 200,
    });
    const body = (await res.json()) as { choices: { message: { content: string }; finish_reason: string }[] };
    const content = body.choices[0]!.message.content;
    t.equal(body.choices[0]!.finish_reason, "stop");
    t.ok(new Ajv().compile(schema)(JSON.parse(content)), `validates: ${content}`);
  });

  t.test("stop ends the answer before the stop string", async (t) => {
    const ask = async (extra: Record<string, unknown>) => {
      const res = await v1("chat/completions", {
        model: "chat",
        messages: [{ role: "user", content: "Count to ten" }],
        temperature: 0,
        max_tokens: 12,
        ...extra,
      });
      return ((await res.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content;
    };
    const full = await ask({});
    const words = full.split(" ").filter((w) => w.length > 2);
    const stop = words[Math.floor(words.length / 2)];
    if (!stop) return t.fail(`no word to stop at in ${JSON.stringify(full)}`);
    const cut = await ask({ stop: [stop] });
    t.equal(cut, full.slice(0, full.indexOf(stop)), `stopped before ${JSON.stringify(stop)}`);
  });

  t.test("completions: raw text, streamed and not", async (t) => {
    const res = await v1("completions", { model: "chat", prompt: "Once upon a time", ...greedy });
    const body = (await res.json()) as { choices: { text: string; finish_reason: string }[]; usage: { prompt_tokens: number } };
    t.match(body, { id: /^cmpl-/, object: "text_completion", model: "chat", choices: [{ index: 0, text: String, finish_reason: /^(stop|length)$/ }] });
    const raw = (await (
      await postJson(`${url}/api/generate`, {
        model: "chat",
        prompt: "Once upon a time",
        raw: true,
        stream: false,
        options: { temperature: 0, seed: 5, num_predict: 8 },
      })
    ).json()) as { response: string };
    t.equal(body.choices[0]!.text, raw.response, "the same text as a raw /api/generate");
    const streamed = await v1("completions", { model: "chat", prompt: "Once upon a time", ...greedy, stream: true });
    const events = await sseEvents(t, streamed);
    t.equal(events.pop(), "[DONE]");
    const chunks = events.map((e) => JSON.parse(e) as { choices: { text: string; finish_reason: string | null }[] });
    t.match(chunks[chunks.length - 1]!.choices[0], { text: "", finish_reason: /^(stop|length)$/ });
    t.equal(chunks.map((c) => c.choices[0]!.text).join(""), body.choices[0]!.text);
  });

  t.test("completions with a suffix: fill-in-the-middle through the template, as /api/generate", async (t) => {
    const template = "<PRE> {{ .Prompt }} <SUF>{{ .Suffix }} <MID>";
    t.equal((await postJson(`${url}/api/create`, { model: "fim", from: "chat", template, stream: false })).status, 200);
    const fim = { prompt: "def area(r):", suffix: "return result" };
    // /api/generate first, on a fresh prompt: its prompt_eval_count is the whole rendered prompt.
    const options = { temperature: 0, seed: 5, num_predict: 8 };
    const gen = (await (await postJson(`${url}/api/generate`, { model: "fim", ...fim, stream: false, options })).json()) as {
      response: string;
      prompt_eval_count: number;
    };
    const res = await v1("completions", { model: "fim", ...fim, ...greedy });
    t.equal(res.status, 200);
    const body = (await res.json()) as { choices: { text: string }[]; usage: { prompt_tokens: number } };
    t.equal(body.choices[0]!.text, gen.response, "the same text as /api/generate with the suffix");
    t.equal(body.usage.prompt_tokens, gen.prompt_eval_count, "the same rendered prompt");
    await assertError(t, await v1("completions", { model: "chat", ...fim }), 400, "model 'chat' does not support insert");
    await assertError(t, await v1("completions", { model: "chat", ...fim, stream: true, echo: true }), 400, "model 'chat' does not support insert");
    t.equal((await fetch(`${url}/api/delete`, { method: "DELETE", body: JSON.stringify({ model: "fim" }) })).status, 200);
  });

  t.test("embeddings: float and base64", async (t) => {
    const res = await v1("embeddings", { model: "chat", input: ["red apple", "blue sky"] });
    const body = (await res.json()) as { object: string; data: { object: string; index: number; embedding: number[] }[]; usage: { prompt_tokens: number } };
    t.match(body, {
      object: "list",
      model: "chat",
      data: [
        { object: "embedding", index: 0 },
        { object: "embedding", index: 1 },
      ],
      usage: { prompt_tokens: Number, total_tokens: Number },
    });
    const v = body.data[0]!.embedding;
    t.equal(v.length, 64);
    t.ok(Math.abs(Math.hypot(...v) - 1) < 1e-6, "normalized");
    const b64 = (await (await v1("embeddings", { model: "chat", input: "red apple", encoding_format: "base64", dimensions: 16 })).json()) as {
      data: { embedding: string }[];
    };
    const bytes = Buffer.from(b64.data[0]!.embedding, "base64");
    const floats = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
    t.equal(floats.length, 16, "dimensions");
    t.ok(Math.abs(Math.hypot(...floats) - 1) < 1e-5, "normalized after truncation");
  });

  t.test("models", async (t) => {
    const list = (await (await fetch(`${url}/v1/models`)).json()) as { object: string; data: { id: string; object: string; owned_by: string }[] };
    t.equal(list.object, "list");
    t.same(list.data.map((m) => m.id).sort(), ["chat:latest", "hf.co/someone/chat-model:Q8_0"]);
    t.match(list.data.find((m) => m.id === "chat:latest"), { object: "model", created: Number, owned_by: "library" });
    const one = await fetch(`${url}/v1/models/hf.co/someone/chat-model:Q8_0`);
    t.equal(one.status, 200);
    t.match(await one.json(), { id: "hf.co/someone/chat-model:Q8_0", object: "model", owned_by: "someone" });
    await assertError(t, await fetch(`${url}/v1/models/nope`), 404, "model 'nope' not found, try pulling it first");
  });

  t.test("errors", async (t) => {
    const missing = "model 'nope' not found, try pulling it first";
    await assertError(t, await v1("chat/completions", { model: "nope", messages: [{ role: "user", content: "hi" }] }), 404, missing);
    await assertError(t, await v1("completions", { model: "nope", prompt: "hi" }), 404, missing);
    await assertError(t, await v1("embeddings", { model: "nope", input: "hi" }), 404, missing);
    await assertError(t, await v1("chat/completions", { model: "chat" }), 400, "messages is required");
    await assertError(
      t,
      await v1("chat/completions", { model: "chat", messages: [{ role: "user", content: "hi" }], temperature: 2.5 }),
      400,
      "temperature must be between 0 and 2",
    );
    await assertError(
      t,
      await v1("chat/completions", { model: "chat", messages: [{ role: "user", content: [{ type: "image_url" }] }] }),
      400,
      "model 'chat' does not support images",
    );
    const hi = [{ role: "user", content: "hi" }];
    await assertError(
      t,
      await v1("chat/completions", { model: "chat", messages: hi, response_format: { type: "json_schema", json_schema: { name: "x" } } }),
      400,
      "response_format.json_schema.schema is required",
    );
    await assertError(t, await v1("chat/completions", { model: "chat", messages: [] }), 400, "messages must have at least 1 items");
    await assertError(t, await v1("chat/completions", { model: "chat", messages: hi, n: 2 }), 400, "n must be 1: one choice per request is supported");
    await assertError(
      t,
      await v1("chat/completions", { model: "chat", messages: hi, tool_choice: "sometimes" }),
      400,
      "invalid value for parameter 'tool_choice': expected one of none, auto, required",
    );
    await assertError(t, await v1("embeddings", { model: "chat", input: "hi", dimensions: 65 }), 400, "dimensions must be between 1 and 64");
    await assertError(t, await fetch(`${url}/v1/chat/completions`), 405, "method GET not allowed on /v1/chat/completions");
  });
});
