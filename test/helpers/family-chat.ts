/**
 * The conversation, the tools and each family's call format for test/integration/families.test.ts,
 * and node-llama-cpp's rendering of that conversation as text.
 */
import { SpecialToken, type ChatHistoryItem, type LlamaModel, type LlamaText } from "node-llama-cpp";

export const params = { type: "object", properties: { city: { enum: ["Paris"] } }, required: ["city"] } as const;
export const tools = [{ type: "function", function: { name: "get_weather", description: "Current weather in a city", parameters: params } }];
export const question = [{ role: "system", content: "You are terse." }, { role: "user", content: "Weather in Paris?" }];
export const callMessage = { role: "assistant", content: "", tool_calls: [{ function: { name: "get_weather", arguments: { city: "Paris" } } }] };
export const resultMessage = { role: "tool", content: '{"temp":21}', tool_name: "get_weather" };

/** The same conversation as node-llama-cpp's history: the result joins the call it answers. */
export const history: ChatHistoryItem[] = [
  { type: "system", text: "You are terse." },
  { type: "user", text: "Weather in Paris?" },
  { type: "model", response: [{ type: "functionCall", name: "get_weather", params: { city: "Paris" }, result: { temp: 21 } }] },
];

/**
 * Each call format: the call and its result as the family's template writes them. (DeepSeek-R1:
 * node-llama-cpp renders it with its DeepSeek wrapper, whose call syntax is `<function=…>`.)
 */
export const FORMATS: Record<string, { call: string; result: string }> = {
  "llama3.1": { call: '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>', result: '<|start_header_id|>ipython<|end_header_id|>\n\n{"temp": 21}<|eot_id|>' },
  qwen3: { call: '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>', result: '<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response><|im_end|>' },
  "qwen3.5": { call: "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>", result: "<tool_response>\n" },
  gemma4: { call: "<|tool_call>call:get_weather{", result: "response:get_weather{" },
  "deepseek-r1": { call: '<function=get_weather>{"city": "Paris"}</function>', result: '<｜tool▁output▁begin｜>{"temp": 21}<｜tool▁output▁end｜>' },
};
export const THINKING = ["qwen3.5", "deepseek-r1"];

/** node-llama-cpp's rendering as text: the BOS evaluation adds left out, special tokens as their text. */
export function text(model: LlamaModel, value: LlamaText): string {
  const values = [...value.values];
  if (values[0] instanceof SpecialToken && values[0].value === "BOS") values.shift();
  return values.map((v) => (v instanceof SpecialToken ? model.detokenize(v.tokenize(model.tokenizer), true) : v.toString())).join("");
}
