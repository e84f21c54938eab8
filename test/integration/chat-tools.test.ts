/**
 * Tool calling on the real runner. A model with random weights never decides to call a tool by
 * itself, so the call is forced: `tool_choice: "required"` (or a named function) makes the answer
 * open inside the chat wrapper's function-call syntax, and node-llama-cpp's grammars restrict the
 * function name to the tools and the arguments to the tool's JSON Schema. The arguments here are
 * enums so that the call is complete in a few tokens. What is tested is lmd's part: tools offered,
 * the call surfaced as `tool_calls`, the result fed back into the next turn's prompt.
 */
import { Ajv } from "ajv";
import t from "tap";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";

const weatherParams = {
  type: "object",
  properties: { city: { enum: ["Paris", "London", "Tokyo"] }, unit: { enum: ["celsius", "fahrenheit"] } },
  required: ["city", "unit"],
};
const tools = [
  { type: "function", function: { name: "get_weather", description: "Current weather in a city", parameters: weatherParams } },
  {
    type: "function",
    function: {
      name: "get_time",
      description: "Current time in a city",
      parameters: { type: "object", properties: { city: { enum: ["Paris", "Tokyo"] } }, required: ["city"] },
    },
  },
];
const options = { temperature: 0.7, seed: 11, max_tokens: 60 };

interface Completion {
  choices: {
    message: { role: string; content: string | null; tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[] };
    finish_reason: string;
  }[];
  usage: { prompt_tokens: number; completion_tokens: number };
}

t.test("tool calls", async (t) => {
  const { url } = await startDaemon(t, { models: [{ name: "chat", make: { preset: "tiny", chatTemplate: "chatml-tools" } }] });
  const v1 = async (body: Record<string, unknown>) => {
    const res = await postJson(`${url}/v1/chat/completions`, { model: "chat", ...options, ...body });
    t.equal(res.status, 200, "status 200");
    return (await res.json()) as Completion;
  };
  const question = [{ role: "user", content: "What is the weather in Paris?" }];

  t.test("round trip on /v1: a forced call, its result fed back, an answer", async (t) => {
    const first = await v1({ messages: question, tools, tool_choice: "required" });
    const choice = first.choices[0]!;
    t.equal(choice.finish_reason, "tool_calls");
    t.equal(choice.message.content, null, "no text beside the call");
    const call = choice.message.tool_calls?.[0];
    t.ok(call, "one tool call");
    if (!call) return;
    t.match(call, { id: /^call_/, type: "function", function: { name: /^(get_weather|get_time)$/ } });
    const args = JSON.parse(call.function.arguments) as unknown;
    const schema = call.function.name === "get_weather" ? weatherParams : tools[1]!.function.parameters;
    t.ok(new Ajv().compile(schema)(args), `arguments match the tool's schema: ${call.function.arguments}`);

    const followUp = (result: string) => [...question, choice.message, { role: "tool", tool_call_id: call.id, content: result }];
    const short = await v1({ messages: followUp('{"temp":21}'), tools, max_tokens: 4 });
    const long = await v1({
      messages: followUp('{"temp":21,"sky":"clear and bright with a light breeze from the west","humidity":"low"}'),
      tools,
      max_tokens: 4,
    });
    t.match(short.choices[0], { finish_reason: /^(stop|length)$/, message: { role: "assistant", content: String } });
    t.ok(long.usage.prompt_tokens > short.usage.prompt_tokens, "the tool result is part of the next prompt");
  });

  t.test("a named tool_choice calls that tool", async (t) => {
    const body = await v1({ messages: question, tools, tool_choice: { type: "function", function: { name: "get_time" } } });
    t.equal(body.choices[0]?.message.tool_calls?.[0]?.function.name, "get_time");
    t.ok(
      new Ajv().compile(tools[1]!.function.parameters)(JSON.parse(body.choices[0]?.message.tool_calls?.[0]?.function.arguments ?? "null")),
      "its arguments match its schema",
    );
  });

  t.test("tool_choice none: tools are not offered", async (t) => {
    const none = await v1({ messages: question, tools, tool_choice: "none", max_tokens: 1 });
    const without = await v1({ messages: question, max_tokens: 1 });
    const offered = await v1({ messages: question, tools, max_tokens: 1 });
    t.equal(none.usage.prompt_tokens, without.usage.prompt_tokens, "same prompt as without tools");
    t.ok(offered.usage.prompt_tokens > without.usage.prompt_tokens, "offered tools are documented in the prompt");
  });

  t.test("/api/chat: tool calls and results in the history", async (t) => {
    const chat = async (result: string) => {
      const res = await postJson(`${url}/api/chat`, {
        model: "chat",
        stream: false,
        keep_alive: 0, // each answer starts from a fresh model: prompt_eval_count is the whole prompt
        tools,
        options: { temperature: 0, num_predict: 4 },
        messages: [
          ...question,
          { role: "assistant", content: "", tool_calls: [{ function: { name: "get_weather", arguments: { city: "Paris", unit: "celsius" } } }] },
          { role: "tool", tool_name: "get_weather", content: result },
        ],
      });
      t.equal(res.status, 200);
      return (await res.json()) as { message: { role: string; content: string }; prompt_eval_count: number; eval_count: number; done: boolean };
    };
    const a = await chat("21 degrees");
    t.match(a, { done: true, message: { role: "assistant", content: String } });
    t.ok(a.eval_count >= 1 && a.eval_count <= 4, `eval_count counts the generated tokens (${a.eval_count}, num_predict 4)`);
    const b = await chat("21 degrees, clear sky, light breeze from the west, low humidity, no rain expected today");
    t.ok(b.prompt_eval_count > a.prompt_eval_count, "the tool result is rendered into the prompt");
  });

  t.test("tool errors", async (t) => {
    await assertError(
      t,
      await postJson(`${url}/v1/chat/completions`, { model: "chat", messages: question, tools, tool_choice: { type: "function", function: { name: "nope" } } }),
      400,
      "invalid value for parameter 'tool_choice': tool 'nope' is not among the tools",
    );
    await assertError(
      t,
      await postJson(`${url}/v1/chat/completions`, { model: "chat", messages: question, tools: [tools[0], tools[0]] }),
      400,
      "duplicate tool name 'get_weather'",
    );
    await assertError(
      t,
      await postJson(`${url}/api/chat`, {
        model: "chat",
        messages: [{ role: "assistant", content: "", tool_calls: [{ function: { name: "f", arguments: "{not json" } }] }],
      }),
      400,
      "invalid value for parameter 'messages[0].tool_calls[0].function.arguments': not valid JSON",
    );
  });
});
