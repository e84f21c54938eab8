/**
 * The request converters of `/v1/messages` and `/v1/responses`: what chat turns, tools and choices
 * a request becomes (the runner renders the turns; the integration tests check it end to end).
 */
import t from "tap";
import { toChatCall as anthropicCall, toOptions as anthropicOptions } from "../../src/routes/anthropic/convert.js";
import { toChatCall as responsesCall } from "../../src/routes/openai/responses-convert.js";
import { toTurns } from "../../src/routes/openai/convert.js";
import { toTurn } from "../../src/routes/chat.js";
import type { AnthropicRequest } from "../../src/api/anthropic.js";
import type { ResponsesRequest } from "../../src/api/responses.js";

const tool = { name: "get_weather", input_schema: { type: "object" } };

t.test("anthropic: blocks → turns", async (t) => {
  const body: AnthropicRequest = {
    model: "m",
    max_tokens: 5,
    system: [{ type: "text", text: "A" }, { type: "text", text: "B" }],
    tools: [tool],
    tool_choice: { type: "any" },
    thinking: { type: "disabled" },
    messages: [
      { role: "user", content: "Weather?" },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "hm" },
          { type: "text", text: "Let me see." },
          { type: "tool_use", id: "t1", name: "get_weather", input: { city: "Paris" } },
        ],
      },
      {
        role: "user",
        content: [{ type: "tool_result", tool_use_id: "t1", content: [{ type: "text", text: "21C" }] }, { type: "text", text: "And tomorrow?" }],
      },
    ],
  };
  const call = anthropicCall(body, "m");
  t.same(call.turns, [
    { role: "system", content: "AB" },
    { role: "user", content: "Weather?" },
    { role: "assistant", content: "Let me see.", toolCalls: [{ id: "t1", name: "get_weather", arguments: { city: "Paris" } }] },
    { role: "tool", content: "21C", toolName: "get_weather", toolCallId: "t1" },
    { role: "user", content: "And tomorrow?" },
  ], "system blocks joined, thoughts dropped, results before the user's text and matched to their call; the ids kept for the template");
  t.same([call.toolChoice, call.think, call.tools?.[0]?.parameters], ["required", false, { type: "object" }]);
  t.same(anthropicOptions({ ...body, stop_sequences: ["x"], top_k: 3 }), { num_predict: 5, stop: ["x"], top_k: 3 });
  t.equal(anthropicCall({ ...body, thinking: { type: "enabled", budget_tokens: 100 } }, "m").think, undefined, "enabled keeps the model's default");
  t.same(anthropicCall({ ...body, tool_choice: { type: "tool", name: "get_weather" } }, "m").toolChoice, { name: "get_weather" });
  t.throws(() => anthropicCall({ ...body, messages: [{ role: "user", content: [{ type: "document" }] }] }, "m"), {
    status: 400,
    message: "unsupported content block type 'document'",
  });
  t.throws(() => anthropicCall({ ...body, tools: [tool, tool] }, "m"), { status: 400, message: "duplicate tool name 'get_weather'" });
});

t.test("responses: items → turns", async (t) => {
  const body: ResponsesRequest = {
    model: "m",
    instructions: "Be brief.",
    input: [
      { role: "developer", content: "Rules." },
      { role: "user", content: [{ type: "input_text", text: "Weather in " }, { type: "input_text", text: "Paris and Tokyo?" }] },
      { type: "reasoning" },
      { type: "function_call", call_id: "c1", name: "get_weather", arguments: '{"city":"Paris"}' },
      { type: "function_call", call_id: "c2", name: "get_time", arguments: "" },
      { type: "function_call_output", call_id: "c2", output: "noon" },
      { type: "function_call_output", call_id: "c1", output: "21C" },
    ],
    tools: [{ type: "function", name: "get_weather" }, { type: "function", name: "get_time" }],
    tool_choice: { type: "function", name: "get_time" },
    text: { format: { type: "json_schema", name: "x", schema: { type: "object" } } },
  };
  const call = responsesCall(body, "m");
  t.same(call.turns, [
    { role: "system", content: "Be brief." },
    { role: "system", content: "Rules." },
    { role: "user", content: "Weather in Paris and Tokyo?" },
    {
      role: "assistant",
      content: "",
      toolCalls: [
        { id: "c1", name: "get_weather", arguments: { city: "Paris" } },
        { id: "c2", name: "get_time", arguments: {} },
      ],
    },
    { role: "tool", content: "noon", toolName: "get_time", toolCallId: "c2" },
    { role: "tool", content: "21C", toolName: "get_weather", toolCallId: "c1" },
  ], "consecutive calls are one assistant turn; outputs find their call by call_id; the ids kept for the template");
  t.same([call.toolChoice, call.grammar], [{ name: "get_time" }, { kind: "schema", schema: { type: "object" } }]);
  t.same(responsesCall({ model: "m", input: "hi" }, "m").turns, [{ role: "user", content: "hi" }]);
  t.throws(() => responsesCall({ ...body, previous_response_id: "resp_1" }, "m"), { status: 400, message: /previous_response_id is not supported/ });
  t.throws(() => responsesCall({ ...body, input: [{ type: "item_reference" }] }, "m"), {
    status: 400,
    message: "unsupported input item type 'item_reference'",
  });
  t.throws(() => responsesCall({ ...body, input: [{ role: "user", content: [{ type: "input_image" }] }] }, "m"), {
    status: 400,
    message: "model 'm' does not support images",
  });
});

t.test("/api/chat and /v1/chat/completions: a call's id and a result's tool_call_id reach the turns", async (t) => {
  const call = { id: "call_ab12cd34", function: { name: "get_weather", arguments: { city: "Paris" } } };
  t.same(toTurn({ role: "assistant", content: "", tool_calls: [call] }, 1), {
    role: "assistant",
    content: "",
    toolCalls: [{ id: "call_ab12cd34", name: "get_weather", arguments: { city: "Paris" } }],
  });
  t.same(toTurn({ role: "tool", content: "21C", tool_name: "get_weather", tool_call_id: "call_ab12cd34" }, 2), {
    role: "tool",
    content: "21C",
    toolName: "get_weather",
    toolCallId: "call_ab12cd34",
  });
  t.same(
    toTurn({ role: "assistant", content: "", tool_calls: [{ function: call.function }] }, 1).toolCalls,
    [{ name: "get_weather", arguments: { city: "Paris" } }],
    "no id, none made up",
  );
  const turns = toTurns(
    [
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
      { role: "tool", content: "21C", tool_call_id: "call_1" },
    ],
    "m",
  );
  t.same(turns, [
    { role: "assistant", content: "", toolCalls: [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }] },
    { role: "tool", content: "21C", toolName: "get_weather", toolCallId: "call_1" },
  ]);
});
