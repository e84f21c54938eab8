/**
 * Real families, part 2 (models as in families.test.ts, the same cached
 * files): a forced tool call round trips in four call formats, and thinking on two thinking families.
 * - Round trip: `tool_choice: "required"` on /v1 makes the answer open in the family's call syntax
 *   (name and arguments under grammar: random weights never call by themselves); lmd returns it as
 *   `tool_calls`; the call as the client got it, sent back with its result on /api/chat, renders the
 *   same conversation as the original call (which families.test.ts shows node-llama-cpp renders
 *   alike), with the call and the result in the family's format (written from its template:
 *   test/helpers/family-chat.ts FORMATS).
 * - Thinking: the prompt is the family's template's for `enable_thinking` true (`think` true or
 *   unset) and false, on /api/chat and /api/generate; where that opens the thought, `think: true` puts the generated thought
 *   in `message.thinking` and not in `content` (random weights never close it); `think: false` gives
 *   no thinking and the generated tokens as content.
 * Checks known to fail (a family's template form that node-llama-cpp's wrapper does not render, a
 * thinking gap) run as tap todos with the reason (test/helpers/family-chat.ts): reported, not hidden,
 * and not counted.
 */
import t, { type Test } from "tap";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { callMessage, FORMATS, question, resultMessage, TEMPLATE_ONLY_FORMATS, THINK_QUESTION, THINKING, tools } from "../helpers/family-chat.js";
import { FAMILIES, familyModel } from "../helpers/families.js";

const NAMES = [...new Set([...Object.keys(FORMATS), ...Object.keys(TEMPLATE_ONLY_FORMATS), ...Object.keys(THINKING)])];

t.test("real families: tool call round trips and thinking", async (t) => {
  const families = FAMILIES.filter((f) => NAMES.includes(f.name));
  t.equal(families.length, NAMES.length, "every family named here is in the helper");
  t.ok(Object.keys(FORMATS).length >= 4, "four call formats");
  const models = await Promise.all(families.map(async (f) => ({ name: f.name, make: await familyModel(f) })));
  const { url } = await startDaemon(t, { models, env: { SERVICE_CONTEXT_LENGTH: "512" } });
  const chat = async (t: Test, body: Record<string, unknown>) => {
    const res = await postJson(`${url}/api/chat`, { stream: false, ...body });
    const json = (await res.json()) as { message?: { content: string; thinking?: string }; _debug_info?: { rendered_template: string }; error?: string };
    t.equal(res.status, 200, json.error ?? "status 200");
    return json;
  };
  const render = async (t: Test, model: string, messages: unknown[]) =>
    (await chat(t, { model, tools, messages, _debug_render_only: true }))._debug_info?.rendered_template ?? "";

  for (const f of families) {
    t.test(f.name, async (t) => {
      const format = FORMATS[f.name];
      const templateOnly = TEMPLATE_ONLY_FORMATS[f.name];
      if (format || templateOnly) {
        const res = await postJson(`${url}/v1/chat/completions`, {
          model: f.name,
          messages: question,
          tools,
          tool_choice: "required",
          temperature: 0,
          max_tokens: 40,
        });
        const body = (await res.json()) as {
          choices: { message: { tool_calls?: { function: { name: string; arguments: string } }[] }; finish_reason: string }[];
        };
        const call = body.choices[0]?.message.tool_calls?.[0];
        t.equal(body.choices[0]?.finish_reason, "tool_calls", "the forced answer is a tool call");
        t.equal(call?.function.name, "get_weather", "the tool's name");
        t.same(JSON.parse(call?.function.arguments ?? "null"), { city: "Paris" }, "its arguments");
        // The call as the client got it goes back with its result on /api/chat.
        const back = {
          role: "assistant",
          content: "",
          tool_calls: [{ function: { name: call?.function.name ?? "", arguments: JSON.parse(call?.function.arguments ?? "{}") as unknown } }],
        };
        const [next, original] = await Promise.all([
          render(t, f.name, [...question, back, resultMessage]),
          render(t, f.name, [...question, callMessage, resultMessage]),
        ]);
        t.equal(next, original, "the round trip renders the same conversation");
        if (format) {
          t.ok(next.includes(format.call), `the call in the family's format (${format.spec}): ${JSON.stringify(format.call)}`);
          t.ok(next.includes(format.result), `the result in the family's format: ${JSON.stringify(format.result)}`);
        }
        const template = format?.template ?? templateOnly;
        if (template)
          t.ok(next.includes(template.call), `the call as the family's template writes it: ${JSON.stringify(template.call)}`, { todo: template.why });
      }

      const thinking = THINKING[f.name];
      if (thinking) {
        const ask = { model: f.name, messages: [{ role: "user", content: THINK_QUESTION }], options: { temperature: 0, num_predict: 8 } };
        for (const think of [true, undefined, false]) {
          const rendered = (await chat(t, { ...ask, think, _debug_render_only: true }))._debug_info?.rendered_template;
          t.equal(
            rendered,
            think === false ? thinking.off : thinking.on,
            `think: ${think}: the prompt as the template writes it with enable_thinking=${think !== false}`,
          );
        }
        if (thinking.opens) {
          const on = await chat(t, { ...ask, think: true });
          t.ok((on.message?.thinking ?? "").length > 0, "think: true → the thought is in message.thinking");
          t.notOk(on.message?.content.includes(on.message?.thinking ?? "\0"), "and not in content");
        }
        const off = await chat(t, { ...ask, think: false });
        t.equal(off.message?.thinking, undefined, "think: false → no thinking");
        t.ok((off.message?.content ?? "").length > 0, "the tokens are content");
        // /api/generate renders the same prompt (a user turn) and splits its output the same way.
        const gen = async (body: Record<string, unknown>) => {
          const res = await postJson(`${url}/api/generate`, {
            model: f.name,
            prompt: THINK_QUESTION,
            stream: false,
            options: { temperature: 0, num_predict: 8 },
            ...body,
          });
          t.equal(res.status, 200, "generate: status 200");
          return (await res.json()) as { response?: string; thinking?: string; _debug_info?: { rendered_template: string } };
        };
        for (const think of [true, false]) {
          const rendered = (await gen({ think, _debug_render_only: true }))._debug_info?.rendered_template;
          t.equal(rendered, think ? thinking.on : thinking.off, `generate, think: ${think}: the chat's prompt`);
        }
        if (thinking.opens) {
          const g = await gen({ think: true });
          t.ok((g.thinking ?? "").length > 0, "generate, think: true → the thought is in thinking");
          t.notOk(g.response?.includes(g.thinking ?? "\0"), "and not in response");
        }
        const g = await gen({ think: false });
        t.equal(g.thinking, undefined, "generate, think: false → no thinking");
        t.ok((g.response ?? "").length > 0, "the tokens are the response");
      }
    });
  }
});
