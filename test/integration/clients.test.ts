/**
 * lmd as a drop-in for the real client libraries: the `ollama` and `openai` npm packages, unchanged,
 * against the real daemon and runner.
 */
import { Ollama } from "ollama";
import OpenAI, { NotFoundError, BadRequestError } from "openai";
import t from "tap";
import { startDaemon } from "../helpers/daemon.js";

const greedy = { temperature: 0, seed: 3, num_predict: 6 };

t.test("client libraries", async (t) => {
  const { url } = await startDaemon(t, { models: [{ name: "chat", make: { preset: "tiny", chatTemplate: "chatml-tools" } }] });

  t.test("ollama", async (t) => {
    const ollama = new Ollama({ host: url });
    const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello" }];

    const generated = await ollama.generate({ model: "chat", prompt: "Once upon a time", options: greedy });
    t.match(generated, { model: "chat", done: true, response: String, eval_count: Number });

    const chat = await ollama.chat({ model: "chat", messages, options: greedy });
    t.match(chat, { model: "chat", done: true, message: { role: "assistant", content: String }, prompt_eval_count: Number });
    let streamed = "";
    let final: { done: boolean; done_reason?: string } | undefined;
    for await (const part of await ollama.chat({ model: "chat", messages, options: greedy, stream: true })) {
      streamed += part.message.content;
      if (part.done) final = part;
    }
    t.equal(streamed, chat.message.content, "the stream adds up to the same answer");
    t.match(final, { done: true, done_reason: /^(stop|length)$/ });

    const embedded = await ollama.embed({ model: "chat", input: ["red apple", "blue sky"] });
    t.equal(embedded.embeddings.length, 2);
    t.ok(Math.abs(Math.hypot(...embedded.embeddings[0]!) - 1) < 1e-9, "normalized");

    const list = await ollama.list();
    t.same(list.models.map((m) => m.name), ["chat:latest"]);
    const show = await ollama.show({ model: "chat" });
    t.match(show, { details: { format: "gguf" }, model_info: Object });
    const ps = await ollama.ps();
    t.equal(ps.models[0]?.name, "chat:latest", "the model is loaded");

    const err = await ollama.chat({ model: "nope", messages }).catch((e: unknown) => e);
    // ollama-js does not export its ResponseError class; its name and fields are what callers check.
    t.ok(err instanceof Error, "an Error");
    t.match(err, { name: "ResponseError", status_code: 404, error: "model 'nope' not found, try pulling it first" });
  });

  t.test("openai", async (t) => {
    const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
    const messages = [{ role: "user" as const, content: "Hello" }];

    const completion = await openai.chat.completions.create({ model: "chat", messages, temperature: 0, max_tokens: 6, seed: 1 });
    t.match(completion, { object: "chat.completion", choices: [{ message: { role: "assistant", content: String } }], usage: { completion_tokens: Number } });
    let streamed = "";
    let usage: OpenAI.CompletionUsage | undefined;
    const stream = await openai.chat.completions.create({
      model: "chat",
      messages,
      temperature: 0,
      max_tokens: 6,
      seed: 1,
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const chunk of stream) {
      streamed += chunk.choices[0]?.delta.content ?? "";
      usage = chunk.usage ?? usage;
    }
    t.equal(streamed, completion.choices[0]?.message.content, "the stream adds up to the same answer");
    t.equal(usage?.completion_tokens, completion.usage?.completion_tokens, "usage in the last chunk");

    const forced = await openai.chat.completions.create({
      model: "chat",
      messages,
      max_tokens: 60,
      tools: [
        { type: "function", function: { name: "pick", parameters: { type: "object", properties: { color: { enum: ["red", "blue"] } }, required: ["color"] } } },
      ],
      tool_choice: "required",
    });
    const call = forced.choices[0]?.message.tool_calls?.[0];
    t.equal(forced.choices[0]?.finish_reason, "tool_calls");
    t.match(call?.type === "function" ? JSON.parse(call.function.arguments) : undefined, { color: /^(red|blue)$/ });

    const text = await openai.completions.create({ model: "chat", prompt: "Once upon a time", max_tokens: 6, temperature: 0 });
    t.match(text, { object: "text_completion", choices: [{ text: String }] });

    // The SDK asks for base64 by default and decodes it itself.
    const embedding = await openai.embeddings.create({ model: "chat", input: "red apple" });
    t.equal(embedding.data[0]?.embedding.length, 64);
    t.ok(Math.abs(Math.hypot(...embedding.data[0]!.embedding) - 1) < 1e-5, "normalized");

    const models = await openai.models.list();
    t.same(models.data.map((m) => m.id), ["chat:latest"]);
    t.match(await openai.models.retrieve("chat:latest"), { id: "chat:latest", object: "model" });

    const missing = await openai.chat.completions.create({ model: "nope", messages }).catch((e: unknown) => e);
    t.ok(missing instanceof NotFoundError, "NotFoundError");
    t.match(missing, { status: 404, message: /model 'nope' not found/ });
    t.ok((await openai.models.retrieve("nope").catch((e: unknown) => e)) instanceof NotFoundError, "NotFoundError for a model lookup");
    const bad = await openai.chat.completions.create({ model: "chat", messages, temperature: 5 }).catch((e: unknown) => e);
    t.ok(bad instanceof BadRequestError, "BadRequestError");
    t.match(bad, { status: 400, message: /temperature must be between 0 and 2/ });
  });
});
