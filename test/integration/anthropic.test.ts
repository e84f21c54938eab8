/**
 * Anthropic's Messages API through the official `@anthropic-ai/sdk`, unchanged, against the real
 * daemon and runner: create, stream, tools (a forced call, its result fed back), count_tokens, and
 * the SDK's typed errors from the contract's `{"error": string}` bodies.
 */
import Anthropic, { BadRequestError, NotFoundError } from "@anthropic-ai/sdk";
import t from "tap";
import { postJson, startDaemon } from "../helpers/daemon.js";

const tools: Anthropic.Tool[] = [
  {
    name: "get_weather",
    description: "Current weather in a city",
    input_schema: { type: "object", properties: { city: { enum: ["Paris", "Tokyo"] } }, required: ["city"] },
  },
  { name: "get_time", input_schema: { type: "object", properties: { zone: { enum: ["UTC", "CET"] } }, required: ["zone"] } },
];

t.test("anthropic messages", async (t) => {
  // Tools need a template that shows them (Ollama's tools capability): "tools" has one, "chat" not.
  const { url } = await startDaemon(t, {
    models: [
      { name: "chat", make: { preset: "tiny", chatTemplate: "chatml" } },
      { name: "tools", make: { preset: "tiny", chatTemplate: "chatml-tools" } },
    ],
  });
  const client = new Anthropic({ baseURL: url, apiKey: "unused", maxRetries: 0 });
  const base = { model: "chat", max_tokens: 6, temperature: 0 };
  const messages: Anthropic.MessageParam[] = [{ role: "user", content: "Hello" }];

  t.test("create and stream give the same answer", async (t) => {
    const message = await client.messages.create({ ...base, system: "Be brief.", messages });
    t.match(message, {
      id: /^msg_/,
      type: "message",
      role: "assistant",
      model: "chat",
      content: [{ type: "text", text: String }],
      stop_reason: /^(end_turn|max_tokens)$/,
      stop_sequence: null,
    });
    t.ok(message.usage.input_tokens > 0 && message.usage.output_tokens > 0, "usage counts both sides");

    const events: string[] = [];
    const stream = client.messages.stream({ ...base, system: [{ type: "text", text: "Be brief." }], messages });
    stream.on("streamEvent", (event) => events.push(event.type));
    let text = "";
    stream.on("text", (delta) => (text += delta));
    const final = await stream.finalMessage();
    t.equal(text, (message.content[0] as Anthropic.TextBlock).text, "the deltas add up to the same text (system as a string or as blocks)");
    t.same(final.content, message.content, "the SDK's accumulated message is the same");
    t.same(final.usage, message.usage, "usage arrives in message_delta");
    t.equal(final.stop_reason, message.stop_reason);
    t.same(
      [events[0], events[1], events.at(-3), events.at(-2), events.at(-1)],
      ["message_start", "content_block_start", "content_block_stop", "message_delta", "message_stop"],
      "Anthropic's event order",
    );
  });

  t.test("max_tokens and stop_sequences", async (t) => {
    const long = await client.messages.create({ ...base, max_tokens: 12, messages });
    t.equal(long.stop_reason, "max_tokens");
    t.equal(long.usage.output_tokens, 12);
    const text = (long.content[0] as Anthropic.TextBlock).text;
    const stop = text.slice(2, 4);
    const stopped = await client.messages.create({ ...base, max_tokens: 12, messages, stop_sequences: [stop] });
    t.equal((stopped.content[0] as Anthropic.TextBlock).text, text.slice(0, text.indexOf(stop)), "generation stops before the stop sequence");
    t.match(stopped, { stop_reason: "stop_sequence", stop_sequence: stop }, "which stop sequence ended it");
    const streamed = await client.messages.stream({ ...base, max_tokens: 12, messages, stop_sequences: ["zzz-never", stop] }).finalMessage();
    t.match(streamed, { stop_reason: "stop_sequence", stop_sequence: stop }, "in message_delta too");
  });

  t.test("tools: a forced tool_use, its tool_result fed back", async (t) => {
    const first = await client.messages.create({
      ...base,
      model: "tools",
      max_tokens: 60,
      temperature: 0.7,
      messages: [{ role: "user", content: "Weather in Paris?" }],
      tools,
      tool_choice: { type: "any" },
    });
    t.equal(first.stop_reason, "tool_use");
    const use = first.content.find((b): b is Anthropic.ToolUseBlock => b.type === "tool_use");
    t.ok(use, "a tool_use block");
    if (!use) return;
    t.match(use, {
      id: /^toolu_/,
      name: /^(get_weather|get_time)$/,
      input: use.name === "get_weather" ? { city: /^(Paris|Tokyo)$/ } : { zone: /^(UTC|CET)$/ },
    });

    const named = await client.messages.create({ ...base, model: "tools", max_tokens: 60, messages, tools, tool_choice: { type: "tool", name: "get_time" } });
    t.match(named.content.find((b) => b.type === "tool_use"), { name: "get_time", input: { zone: /^(UTC|CET)$/ } }, "tool_choice names the tool");

    const streamed = await client.messages
      .stream({ ...base, model: "tools", max_tokens: 60, messages, tools, tool_choice: { type: "tool", name: "get_time" } })
      .finalMessage();
    t.match(
      streamed.content.find((b) => b.type === "tool_use"),
      { type: "tool_use", name: "get_time", input: { zone: /^(UTC|CET)$/ } },
      "input_json_delta is parsed by the SDK",
    );

    const followUp = (result: string): Anthropic.MessageParam[] => [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: first.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: result }] },
    ];
    const short = await client.messages.create({ ...base, model: "tools", max_tokens: 2, messages: followUp("21C"), tools });
    const long = await client.messages.create({
      ...base,
      model: "tools",
      max_tokens: 2,
      messages: followUp("21C, clear sky, a light breeze from the west, low humidity"),
      tools,
    });
    t.match(short, { stop_reason: /^(end_turn|max_tokens)$/, content: [{ type: "text" }] });
    t.ok(long.usage.input_tokens > short.usage.input_tokens, "the tool result is rendered into the next prompt");
  });

  t.test("count_tokens uses the model's template and tokenizer", async (t) => {
    const message = await client.messages.create({ ...base, max_tokens: 1, system: "Be brief.", messages });
    const counted = await client.messages.countTokens({ model: "chat", system: "Be brief.", messages });
    t.same(counted, { input_tokens: message.usage.input_tokens }, "the same count as the prompt of a generation");
    const plain = await client.messages.countTokens({ model: "tools", system: "Be brief.", messages });
    const withTools = await client.messages.countTokens({ model: "tools", system: "Be brief.", messages, tools });
    t.ok(withTools.input_tokens > plain.input_tokens, "offered tools are counted");
  });

  t.test("errors: the contract's body, the SDK's classes", async (t) => {
    const missing = await client.messages.create({ ...base, model: "nope", messages }).catch((e: unknown) => e);
    t.ok(missing instanceof NotFoundError, "NotFoundError");
    t.match(missing, { status: 404, error: { error: "model 'nope' not found, try pulling it first" } });
    const bad = await client.messages.create({ ...base, temperature: 5, messages }).catch((e: unknown) => e);
    t.ok(bad instanceof BadRequestError, "BadRequestError");
    t.match(bad, { status: 400, error: { error: "temperature must be between 0 and 2" } });

    const noMax = await postJson(`${url}/v1/messages`, { model: "chat", messages });
    t.equal(noMax.status, 400);
    t.same(await noMax.json(), { error: "max_tokens is required" });
    const image = await postJson(`${url}/v1/messages`, {
      ...base,
      messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AA==" } }] }],
    });
    t.same([image.status, await image.json()], [400, { error: "model 'chat' does not support images" }]);
    const wrongTool = await postJson(`${url}/v1/messages`, { ...base, model: "tools", messages, tools, tool_choice: { type: "tool", name: "nope" } });
    t.same([wrongTool.status, await wrongTool.json()], [400, { error: "invalid value for parameter 'tool_choice': tool 'nope' is not among the tools" }]);
  });
});
