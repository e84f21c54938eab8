/**
 * OpenAI's Responses API through the official `openai` SDK, unchanged, against the real daemon and
 * runner: `responses.create` and `responses.stream`, function tools (a forced call, its output fed
 * back), `text.format` json_schema, and the SDK's typed errors.
 */
import { Ajv } from "ajv";
import OpenAI, { BadRequestError, NotFoundError } from "openai";
import t from "tap";
import { startDaemon } from "../helpers/daemon.js";

const tools: OpenAI.Responses.FunctionTool[] = [
  {
    type: "function",
    name: "get_weather",
    description: "Current weather in a city",
    parameters: { type: "object", properties: { city: { enum: ["Paris", "Tokyo"] } }, required: ["city"] },
    strict: true,
  },
  { type: "function", name: "get_time", parameters: { type: "object", properties: { zone: { enum: ["UTC", "CET"] } }, required: ["zone"] }, strict: true },
];

t.test("responses", async (t) => {
  const { url } = await startDaemon(t, { models: [{ name: "chat", make: { preset: "tiny", chatTemplate: "chatml-tools" } }] });
  const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
  const base = { model: "chat", temperature: 0, max_output_tokens: 8 };

  t.test("create and stream give the same answer", async (t) => {
    const created = await openai.responses.create({ ...base, instructions: "Be brief.", input: "Hello" });
    t.match(created, {
      id: /^resp_/,
      object: "response",
      status: /^(completed|incomplete)$/,
      model: "chat",
      instructions: "Be brief.",
      output: [{ type: "message", role: "assistant", content: [{ type: "output_text" }] }],
    });
    t.equal(
      created.output_text,
      (created.output[0] as OpenAI.Responses.ResponseOutputMessage).content.map((c) => (c.type === "output_text" ? c.text : "")).join(""),
    );
    t.ok(created.usage && created.usage.input_tokens > 0 && created.usage.output_tokens > 0, "usage");

    const types: string[] = [];
    let deltas = "";
    const stream = openai.responses.stream({ ...base, instructions: "Be brief.", input: [{ role: "user", content: "Hello" }] });
    stream.on("event", (e) => types.push(e.type));
    stream.on("response.output_text.delta", (e) => (deltas += e.delta));
    const final = await stream.finalResponse();
    t.equal(final.output_text, created.output_text, "string input and a message item render alike; the stream adds up to the same text");
    t.equal(deltas, created.output_text);
    t.match(
      final.usage,
      { input_tokens: created.usage!.input_tokens, output_tokens: created.usage!.output_tokens },
      "usage (cached_tokens differ: the second prompt comes from the cache)",
    );
    t.ok(final.usage!.input_tokens_details.cached_tokens > 0, "cached_tokens counts the prompt cache");
    t.same(types.slice(0, 4), ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"], "the opening events");
    t.same(
      types.slice(-4),
      ["response.output_text.done", "response.content_part.done", "response.output_item.done", `response.${created.status}`],
      "the closing events",
    );
  });

  t.test("max_output_tokens ends an incomplete response", async (t) => {
    const cut = await openai.responses.create({ ...base, max_output_tokens: 3, input: "Hello" });
    t.match(cut, { status: "incomplete", incomplete_details: { reason: "max_output_tokens" }, usage: { output_tokens: 3 } });
    t.match(cut.output, [{ type: "message", status: "incomplete" }], "the message the limit cut is incomplete too (OpenAI's shape)");
    const stream = openai.responses.stream({ ...base, max_output_tokens: 3, input: "Hello" });
    const done: unknown[] = [];
    stream.on("response.output_item.done", (e) => done.push(e.item));
    const streamed = await stream.finalResponse();
    t.match(done, [{ type: "message", status: "incomplete" }], "streamed: its output_item.done says so");
    t.match(streamed, { status: "incomplete", output: [{ type: "message", status: "incomplete" }] });
  });

  t.test("function tools: a forced call, its output fed back", async (t) => {
    const first = await openai.responses.create({
      ...base,
      max_output_tokens: 60,
      temperature: 0.7,
      input: "Weather in Paris?",
      tools,
      tool_choice: "required",
    });
    const call = first.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === "function_call");
    t.ok(call, "a function_call item");
    if (!call) return;
    t.match(call, { call_id: /^call_/, name: /^(get_weather|get_time)$/, status: "completed" });
    const schema = tools.find((x) => x.name === call.name)!.parameters!;
    t.ok(new Ajv().compile(schema)(JSON.parse(call.arguments)), `arguments match the schema: ${call.arguments}`);
    t.notOk(first.output.some((o) => o.type === "message"), "no empty message beside the call");

    const stream = openai.responses.stream({ ...base, max_output_tokens: 60, input: "Time?", tools, tool_choice: { type: "function", name: "get_time" } });
    let args = "";
    stream.on("response.function_call_arguments.delta", (e) => (args += e.delta));
    const streamed = await stream.finalResponse();
    const named = streamed.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === "function_call");
    t.match(named, { name: "get_time", arguments: args }, "the named tool, its arguments streamed");

    const followUp = (output: string): OpenAI.Responses.ResponseInput => [
      { role: "user", content: "Weather in Paris?" },
      call,
      { type: "function_call_output", call_id: call.call_id, output },
    ];
    const short = await openai.responses.create({ ...base, max_output_tokens: 2, input: followUp("21C"), tools });
    const long = await openai.responses.create({
      ...base,
      max_output_tokens: 2,
      input: followUp("21C, clear sky, a light breeze from the west, low humidity"),
      tools,
    });
    t.match(short.output, [{ type: "message" }]);
    t.ok(long.usage!.input_tokens > short.usage!.input_tokens, "the function output is rendered into the next prompt");
  });

  t.test("text.format json_schema constrains the answer", async (t) => {
    const schema = { type: "object", properties: { answer: { enum: ["yes", "no"] } }, required: ["answer"], additionalProperties: false };
    const res = await openai.responses.create({
      ...base,
      max_output_tokens: 40,
      input: "Yes or no?",
      text: { format: { type: "json_schema", name: "answer", schema, strict: true } },
    });
    t.ok(new Ajv().compile(schema)(JSON.parse(res.output_text)), `output matches the schema: ${res.output_text}`);
  });

  t.test("errors", async (t) => {
    const missing = await openai.responses.create({ ...base, model: "nope", input: "hi" }).catch((e: unknown) => e);
    t.ok(missing instanceof NotFoundError, "NotFoundError");
    const stored = await openai.responses.create({ ...base, input: "hi", previous_response_id: "resp_123" }).catch((e: unknown) => e);
    t.ok(stored instanceof BadRequestError, "BadRequestError");
    t.match(stored, { status: 400, message: /previous_response_id is not supported/ });
    const web = await openai.responses.create({ ...base, input: "hi", tools: [{ type: "web_search" }] }).catch((e: unknown) => e);
    t.match(web, { status: 400, message: /unsupported tool type 'web_search'/ });
    // reasoning.effort as on /v1/chat/completions.
    const bogus = await openai.responses.create({ ...base, input: "hi", reasoning: { effort: "bogus" as "low" } }).catch((e: unknown) => e);
    t.match(bogus, { status: 400, message: /invalid reasoning value: \\"bogus\\"/ });
    const high = await openai.responses.create({ ...base, input: "hi", reasoning: { effort: "high" } }).catch((e: unknown) => e);
    t.match(high, { status: 400, message: /does not support thinking/ }, "a level on a model that does not think");
    const none = await openai.responses.create({ ...base, input: "hi", reasoning: { effort: "none" } });
    t.match(none, { object: "response", status: /^(completed|incomplete)$/ }, "none: no thoughts, on any model");
  });
});
