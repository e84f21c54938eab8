/**
 * Issue 12 "Must show" on real families (test/helpers/families.ts): models written by make-model
 * with a family's real vocabulary (every `tokenizer.*` key of llama.cpp's `models/ggml-vocab-*.gguf`,
 * Qwen 3 and DeepSeek-R1 with their own added tokens) and chat template, random weights. One model
 * per family, loaded once, for every check:
 * - llama.cpp's own tokenizer test vectors (`.inp`/`.out`, read as tests/test-tokenizer-0.cpp reads
 *   them: no BOS, special-token text not parsed) come out of `/api/tokenize` token for token;
 * - a chat with system, user, assistant (a tool call) and tool turns renders, through
 *   `_debug_render_only`, exactly what node-llama-cpp renders from the model's template (its chat
 *   wrapper resolved in this process from the file, the history built here by hand, not by lmd);
 * - a forced tool call round trips in the family's call format: `tool_choice: "required"` makes the
 *   answer open in the wrapper's call syntax (name and arguments under grammar: random weights never
 *   call by themselves), lmd returns it as `tool_calls`, and the call with its result, sent back on
 *   /api/chat, renders in that family's format;
 * - thinking, on families whose prompt opens the thought: `think: true` puts the generated thought
 *   in `message.thinking` and not in `content`; `think: false` turns thinking off.
 */
import { readFile } from "node:fs/promises";
import { getLlama, resolveChatWrapper } from "node-llama-cpp";
import t, { type Test } from "tap";
import { readTemplate } from "../../src/gguf/family-vocab.js";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { callMessage, FORMATS, history, params, question, resultMessage, text, THINKING, tools } from "../helpers/family-chat.js";
import { FAMILIES, familyModel, vocabPath } from "../helpers/families.js";
import { llamaSrc } from "../helpers/llama-src.js";
import { testGguf } from "../helpers/models.js";

/** llama.cpp's test vectors: inputs split on its separator, one line of token ids per input. */
async function vectors(file: string): Promise<{ text: string; tokens: number[] }[]> {
  const inputs = (await readFile(`${file}.inp`, "utf8")).split("\n__ggml_vocab_test__\n");
  if (inputs.at(-1) === "") inputs.pop();
  const outputs = (await readFile(`${file}.out`, "utf8")).split("\n");
  if (outputs.at(-1) === "") outputs.pop();
  if (inputs.length !== outputs.length) throw new Error(`${file}: ${inputs.length} inputs, ${outputs.length} outputs`);
  return inputs.map((text, i) => ({ text, tokens: outputs[i]!.trim().split(/\s+/).filter(Boolean).map(Number) }));
}

t.test("real families", async (t) => {
  const src = await llamaSrc();
  const llama = await getLlama({ gpu: false });
  const makes = new Map(await Promise.all(FAMILIES.map(async (f) => [f.name, await familyModel(f)] as const)));
  // node-llama-cpp's renderings first (vocabulary-only loads, here in the test process): a pause
  // between requests longer than the daemon's keep-alive would reset a pooled connection.
  const expected = new Map<string, { text: string; wrapper: string }>();
  for (const f of FAMILIES) {
    const model = await llama.loadModel({ modelPath: await testGguf(makes.get(f.name)), vocabOnly: true });
    const wrapper = resolveChatWrapper(model);
    const functions = { get_weather: { description: "Current weather in a city", params } };
    expected.set(f.name, { text: text(model, wrapper.generateContextState({ chatHistory: history, availableFunctions: functions, documentFunctionParams: true }).contextText), wrapper: wrapper.wrapperName });
    await model.dispose();
  }
  const { url } = await startDaemon(t, { models: FAMILIES.map((f) => ({ name: f.name, make: makes.get(f.name)! })), env: { SERVICE_CONTEXT_LENGTH: "512" } });
  const chat = async (t: Test, body: Record<string, unknown>) => {
    const res = await postJson(`${url}/api/chat`, { stream: false, ...body });
    const json = (await res.json()) as { message?: { content: string; thinking?: string }; _debug_info?: { rendered_template: string }; error?: string };
    t.equal(res.status, 200, json.error ?? "status 200");
    return json;
  };

  for (const f of FAMILIES) {
    t.test(`${f.name} (ggml-vocab-${f.vocab}, ${f.template})`, async (t) => {
      const cases = await vectors(vocabPath(src, f.vocab));
      let same = 0;
      for (const c of cases) {
        const res = await postJson(`${url}/api/tokenize`, { model: f.name, content: c.text, parse_special: false });
        const body = (await res.json()) as { tokens: number[] };
        if (JSON.stringify(body.tokens) === JSON.stringify(c.tokens)) same++;
        else t.same(body.tokens, c.tokens, `tokens of ${JSON.stringify(c.text).slice(0, 60)}`);
      }
      t.equal(same, cases.length, `all ${cases.length} of llama.cpp's test vectors`);
      const show = await postJson(`${url}/api/show`, { model: f.name });
      t.equal(((await show.json()) as { template: string }).template, await readTemplate(f.template, src), "the family's chat template is the model's");

      const { text: rendering, wrapper } = expected.get(f.name)!;
      const rendered = (await chat(t, { model: f.name, tools, messages: [...question, callMessage, resultMessage], _debug_render_only: true }))._debug_info?.rendered_template;
      t.equal(rendered, rendering, `system, user, assistant and tool turns render as node-llama-cpp renders them (${wrapper})`);

      const format = FORMATS[f.name];
      if (format) {
        const res = await postJson(`${url}/v1/chat/completions`, { model: f.name, messages: question, tools, tool_choice: "required", temperature: 0, max_tokens: 40 });
        const body = (await res.json()) as { choices: { message: { tool_calls?: { function: { name: string; arguments: string } }[] }; finish_reason: string }[] };
        const call = body.choices[0]?.message.tool_calls?.[0];
        t.equal(body.choices[0]?.finish_reason, "tool_calls", "the forced answer is a tool call");
        t.equal(call?.function.name, "get_weather");
        t.same(JSON.parse(call?.function.arguments ?? "null"), { city: "Paris" }, "its arguments");
        // The call as the client got it goes back with its result on /api/chat.
        const back = { role: "assistant", content: "", tool_calls: [{ function: { name: call?.function.name ?? "", arguments: JSON.parse(call?.function.arguments ?? "{}") as unknown } }] };
        const next = (await chat(t, { model: f.name, tools, messages: [...question, back, resultMessage], _debug_render_only: true }))._debug_info?.rendered_template ?? "";
        t.equal(next, rendering, "the round trip renders the same conversation");
        t.ok(next.includes(format.call), `the call in the family's format: ${JSON.stringify(format.call)}`);
        t.ok(next.includes(format.result), `the result in the family's format: ${JSON.stringify(format.result)}`);
      }

      if (THINKING.includes(f.name)) {
        const ask = { model: f.name, messages: [{ role: "user", content: "Why is the sky blue?" }], options: { temperature: 0, num_predict: 8 } };
        const on = await chat(t, { ...ask, think: true });
        t.ok((on.message?.thinking ?? "").length > 0, "think: true → the thought is in message.thinking");
        t.notOk(on.message?.content.includes(on.message?.thinking ?? "\0"), "and not in content");
        const off = await chat(t, { ...ask, think: false });
        t.equal(off.message?.thinking, undefined, "think: false → no thinking");
        t.ok((off.message?.content ?? "").length > 0, "the tokens are content");
      }
    });
  }
});
