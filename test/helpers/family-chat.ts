/**
 * The conversation and tools of the families tests (test/integration/families.test.ts and
 * families-tools.test.ts), node-llama-cpp's own rendering of that conversation, and each tested
 * call format as the family's chat template writes it.
 */
import { getLlama, resolveChatWrapper, SpecialToken, type ChatHistoryItem, type Llama, type LlamaModel, type LlamaText } from "node-llama-cpp";

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
 * The call `get_weather({city: "Paris"})` and its result `{"temp": 21}` in each family's call format,
 * written by hand from the family's chat template (llama.cpp's `models/templates/<template>.jinja`):
 * - llama3.1: JSON `{"name", "parameters"}` as the assistant's message; the result as an `ipython` turn;
 * - qwen3 (Hermes): JSON `{"name", "arguments"}` inside `<tool_call>`; the result in `<tool_response>`
 *   inside a user turn;
 * - qwen3.5 (Qwen3-Coder XML): `<function=NAME>` with one `<parameter=NAME>` per argument inside
 *   `<tool_call>`; the result in `<tool_response>`;
 * - gemma4: `<|tool_call>call:NAME{key:<|"|>value<|"|>}<tool_call|>`; the result as `response:NAME{…}`.
 */
export const FORMATS: Record<string, { call: string; result: string }> = {
  "llama3.1": { call: '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>', result: '<|start_header_id|>ipython<|end_header_id|>\n\n{"temp": 21}<|eot_id|>' },
  qwen3: { call: '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>', result: '<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response><|im_end|>' },
  "qwen3.5": { call: "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>", result: "<tool_response>\n" },
  gemma4: { call: "<|tool_call>call:get_weather{", result: "response:get_weather{" },
};
/** Families whose prompt opens the model's thought. */
export const THINKING = ["qwen3.5", "deepseek-r1"];

let llama: Promise<Llama> | undefined;

/**
 * node-llama-cpp's rendering of {@link history} with {@link tools} from the model file's own chat
 * template (its chat wrapper resolved from the file here, in the test process, vocabulary only),
 * and the wrapper's name.
 */
export async function nodeLlamaCppRendering(file: string): Promise<{ text: string; wrapper: string }> {
  llama ??= getLlama({ gpu: false, build: "never", maxThreads: 1 });
  const model = await (await llama).loadModel({ modelPath: file, vocabOnly: true });
  try {
    const wrapper = resolveChatWrapper(model);
    const functions = { get_weather: { description: "Current weather in a city", params } };
    const state = wrapper.generateContextState({ chatHistory: history, availableFunctions: functions, documentFunctionParams: true });
    return { text: text(model, state.contextText), wrapper: wrapper.wrapperName };
  } finally {
    await model.dispose();
  }
}

/** node-llama-cpp's rendering as text: the BOS evaluation adds left out, special tokens as their text. */
function text(model: LlamaModel, value: LlamaText): string {
  const values = [...value.values];
  if (values[0] instanceof SpecialToken && values[0].value === "BOS") values.shift();
  return values.map((v) => (v instanceof SpecialToken ? model.detokenize(v.tokenize(model.tokenizer), true) : v.toString())).join("");
}
