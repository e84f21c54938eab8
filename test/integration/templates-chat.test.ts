/**
 * Go-template models running for real: chat and generate evaluate the Modelfile TEMPLATE
 * (not the GGUF's), tool calls in the template's format come back as `tool_calls` (forced by an
 * honest grammar: a `format` schema, or `tool_choice` on /v1, makes the random-weight model write a
 * call object, which the tool parser reads like any model output), and thinking is split from the
 * content. The model's GGUF template is ChatML; the TEMPLATE below is a different, recognisable one.
 */
import t from "tap";
import { postJson, readNdjson, startDaemon } from "../helpers/daemon.js";

/* eslint-disable max-len -- a template whose lines are its text: a break would change what it renders */
const TEMPLATE = `{{- if .Tools }}[AVAILABLE] {{ json .Tools }}
{{ end }}{{- range .Messages }}<|im_start|>{{ .Role }}
{{ if .ToolCalls }}{{ range .ToolCalls }}{"name": "{{ .Function.Name }}", "arguments": {{ json .Function.Arguments }}}{{ end }}{{ else }}{{ .Content }}{{ end }}<|im_end|>
{{ end }}<|im_start|>assistant
{{ if .Think }}<think>{{ end }}`;
/* eslint-enable max-len */
// Thinking support, as Ollama infers it: .Thinking between tags inside range .Messages.
const THINKING = TEMPLATE.replace("{{ .Content }}{{ end }}", "{{ if .Thinking }}<think>{{ .Thinking }}</think>{{ end }}{{ .Content }}{{ end }}");
const params = { type: "object", properties: { city: { enum: ["Paris", "Tokyo"] } }, required: ["city"] };
const tools = [{ type: "function", function: { name: "get_weather", description: "Weather in a city", parameters: params } }];
const callSchema = { type: "object", properties: { name: { const: "get_weather" }, arguments: params }, required: ["name", "arguments"] };
// The grammar's JSON is pretty-printed in ~70 tokens of the tiny vocabulary.
const options = { temperature: 0, seed: 3, num_predict: 120 };

t.test("Go templates on the real runner", async (t) => {
  const { url } = await startDaemon(t, { models: [{ name: "base", make: { preset: "tiny", chatTemplate: "chatml" } }] });
  t.equal((await postJson(`${url}/api/create`, { model: "tpl", from: "base", template: TEMPLATE, stream: false })).status, 200);
  t.equal((await postJson(`${url}/api/create`, { model: "thinker", from: "base", template: THINKING, stream: false })).status, 200);
  const question = [{ role: "user", content: "Weather in Paris?" }];

  t.test("chat renders the Modelfile TEMPLATE, generate with a .Messages template answers", async (t) => {
    const render = await postJson(`${url}/api/chat`, { model: "tpl", messages: question, tools, _debug_render_only: true });
    t.match(
      ((await render.json()) as { _debug_info: { rendered_template: string } })._debug_info.rendered_template,
      /^\[AVAILABLE\] \[\{"type":"function","function":\{"name":"get_weather"/,
    );
    const gen = await postJson(`${url}/api/generate`, { model: "tpl", prompt: "Hi", stream: false, options: { ...options, num_predict: 4 } });
    t.equal(gen.status, 200, "no more 400 'unsupported template action'");
    const body = (await gen.json()) as { response: string; context: number[]; done: boolean };
    t.equal(body.done, true);
    // The rendered text is evaluated with its special tokens parsed, exactly as the same text sent raw.
    const raw = await postJson(`${url}/api/generate`, {
      model: "tpl",
      prompt: "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
      raw: true,
      stream: false,
      options: { ...options, num_predict: 4 },
    });
    t.same(body.context, ((await raw.json()) as { context: number[] }).context, "same tokens, same greedy answer");
    const withLogprobs = (await (
      await postJson(`${url}/api/chat`, { model: "tpl", messages: question, logprobs: true, stream: false, options: { ...options, num_predict: 5 } })
    ).json()) as { logprobs?: unknown[]; eval_count: number };
    t.equal(withLogprobs.logprobs?.length, withLogprobs.eval_count, "logprobs of every generated token, through the template path too");
    const specials = body.context.filter((tok) => tok === body.context[0]).length;
    t.equal(specials, 2, "<|im_start|> is one token (twice in the prompt), not its letters");
  });

  t.test("a tool call in the template's format comes back as tool_calls, streamed and not", async (t) => {
    const res = await postJson(`${url}/api/chat`, { model: "tpl", messages: question, tools, format: callSchema, stream: false, options });
    t.equal(res.status, 200);
    const body = (await res.json()) as { message: { content: string; tool_calls?: unknown[] }; done_reason: string };
    t.equal(body.message.tool_calls?.length, 1, "one call");
    t.match(body.message.tool_calls?.[0], { function: { name: "get_weather", arguments: { city: /^(Paris|Tokyo)$/ } } });
    t.equal(body.message.content, "", "the call is not content");

    const lines = await readNdjson(await postJson(`${url}/api/chat`, { model: "tpl", messages: question, tools, format: callSchema, options }));
    const calls = lines.flatMap((l) => ((l.message as { tool_calls?: { id?: string }[] } | undefined)?.tool_calls ?? []));
    // Each call has an id of its own, as Ollama's (`call_` and 8 random characters).
    const ids = [...calls, ...(body.message.tool_calls as { id?: string }[])].map((c) => c.id);
    t.match(ids, [/^call_[a-z0-9]{8}$/, /^call_[a-z0-9]{8}$/]);
    t.not(ids[0], ids[1], "drawn for each answer");
    const withoutId = (cs: { id?: string }[]) => cs.map(({ id: _, ...rest }) => rest);
    t.same(withoutId(calls), withoutId(body.message.tool_calls as { id?: string }[]), "the stream carries the same call");
    t.equal(lines.map((l) => (l.message as { content: string }).content).join(""), "", "and no call text as content");

    // The call and its result go back through the template on the next turn.
    const next = [
      ...question,
      { role: "assistant", content: "", tool_calls: body.message.tool_calls },
      { role: "tool", content: "sunny", tool_name: "get_weather" },
    ];
    const render = await postJson(`${url}/api/chat`, { model: "tpl", messages: next, tools, _debug_render_only: true });
    const prompt = ((await render.json()) as { _debug_info: { rendered_template: string } })._debug_info.rendered_template;
    t.match(
      prompt,
      /<\|im_start\|>assistant\n\{"name": "get_weather", "arguments": \{"city":"(Paris|Tokyo)"\}\}<\|im_end\|>\n<\|im_start\|>tool\nsunny<\|im_end\|>/,
    );
  });

  t.test("a call's id and a result's tool_call_id reach a template that shows them", async (t) => {
    const ids = `{{- range .Messages }}{{ .Role }}:{{ range .ToolCalls }}[{{ .ID }} {{ .Function.Name }}]{{ end }}{{ .ToolCallID }}|{{ end }}`;
    t.equal((await postJson(`${url}/api/create`, { model: "ids", from: "base", template: ids, stream: false })).status, 200);
    const messages = [
      ...question,
      { role: "assistant", content: "", tool_calls: [{ id: "call_ab12cd34", function: { name: "get_weather", arguments: { city: "Paris" } } }] },
      { role: "tool", content: "21C", tool_name: "get_weather", tool_call_id: "call_ab12cd34" },
    ];
    const render = await postJson(`${url}/api/chat`, { model: "ids", messages, _debug_render_only: true });
    const prompt = ((await render.json()) as { _debug_info: { rendered_template: string } })._debug_info.rendered_template;
    t.equal(prompt, "user:|assistant:[call_ab12cd34 get_weather]|tool:call_ab12cd34|");
  });

  t.test("/v1 tool_choice 'required' forces a call on a bare-JSON template, streamed and not", async (t) => {
    const v1 = { model: "tpl", messages: question, tools, tool_choice: "required", temperature: 0, seed: 3, max_tokens: 120 };
    const res = await postJson(`${url}/v1/chat/completions`, v1);
    const body = (await res.json()) as {
      choices: { message: { content: string | null; tool_calls?: { function: { name: string; arguments: string } }[] }; finish_reason: string }[];
    };
    t.equal(body.choices[0]?.finish_reason, "tool_calls");
    t.equal(body.choices[0]?.message.tool_calls?.[0]?.function.name, "get_weather");
    t.match(JSON.parse(body.choices[0]?.message.tool_calls?.[0]?.function.arguments ?? "null"), { city: /^(Paris|Tokyo)$/ });
    const sse = await (await postJson(`${url}/v1/chat/completions`, { ...v1, stream: true })).text();
    t.match(sse, /"tool_calls":\[\{"index":0,"id":"call_[0-9a-f]+","type":"function","function":\{"name":"get_weather"/);
    t.match(sse, /"finish_reason":"tool_calls"/);
  });

  t.test("thinking: the output after the template's <think> is `thinking`, not content", async (t) => {
    const notThinking = await postJson(`${url}/api/chat`, { model: "tpl", messages: question, think: true, stream: false });
    t.equal(notThinking.status, 400);
    t.same(await notThinking.json(), { error: '"tpl" does not support thinking' });
    const plain = (await (await postJson(`${url}/api/generate`, { model: "thinker", prompt: "Hi", raw: true, stream: false, options })).json()) as {
      response: string;
    };
    t.ok(plain.response.length > 0);
    const think = (await (await postJson(`${url}/api/chat`, { model: "thinker", messages: question, think: true, stream: false, options })).json()) as {
      message: { content: string; thinking?: string };
    };
    t.ok(think.message.thinking && think.message.thinking.length > 0, "thoughts reported apart");
    t.equal(think.message.content, "", "a thought never closed is not content");
    const off = (await (await postJson(`${url}/api/chat`, { model: "thinker", messages: question, think: false, stream: false, options })).json()) as {
      message: { content: string; thinking?: string };
    };
    t.equal(off.message.thinking, undefined, "think: false → no thinking field");
    t.ok(off.message.content.length > 0);
    const gen = (await (await postJson(`${url}/api/generate`, { model: "thinker", prompt: "Hi", stream: false, options })).json()) as {
      response: string;
      thinking?: string;
    };
    t.ok(gen.thinking && gen.thinking.length > 0, "generate: a thinking template thinks by default (Ollama)");
    t.equal(gen.response, "");
    const v1 = (await (
      await postJson(`${url}/v1/chat/completions`, { model: "thinker", messages: question, reasoning_effort: "low", temperature: 0, seed: 3, max_tokens: 48 })
    ).json()) as { choices: { message: { content: string; reasoning?: string } }[] };
    t.ok(v1.choices[0]?.message.reasoning, "/v1: reasoning");
    // Earlier thoughts reach the template as .Thinking.
    const history = [...question, { role: "assistant", content: "Sunny.", thinking: "Look it up." }, { role: "user", content: "Thanks" }];
    const render = await postJson(`${url}/api/chat`, { model: "thinker", messages: history, think: false, _debug_render_only: true });
    t.match(
      ((await render.json()) as { _debug_info: { rendered_template: string } })._debug_info.rendered_template,
      "<|im_start|>assistant\n<think>Look it up.</think>Sunny.<|im_end|>",
    );
  });

  t.test("format on a thinking model: the thought first, unconstrained, then the answer under the format (Ollama's two passes)", async (t) => {
    // The model's greedy words after the prompt; a closing tag chosen among them ends its thought there.
    const prompt = (
      (await (await postJson(`${url}/api/chat`, { model: "thinker", messages: question, _debug_render_only: true })).json()) as {
        _debug_info: { rendered_template: string };
      }
    )._debug_info.rendered_template;
    const raw = (
      (await (
        await postJson(`${url}/api/generate`, { model: "thinker", prompt, raw: true, stream: false, options: { ...options, num_predict: 16 } })
      ).json()) as { response: string }
    ).response;
    const words = raw.split(/\s+/).filter((w) => w.length >= 3);
    const close = words.find(
      (w, i) => i >= 2 && raw.indexOf(w) === raw.lastIndexOf(w) && raw.indexOf(w) > 0 && raw.indexOf(w) + w.length < raw.trimEnd().length,
    );
    if (!close) return t.fail(`no word of the greedy output can close the thought: ${JSON.stringify(raw)}`);
    const template = THINKING.replace("<think>{{ .Thinking }}</think>", `<think>{{ .Thinking }}${close}`);
    t.equal((await postJson(`${url}/api/create`, { model: "closer", from: "base", template, stream: false })).status, 200);
    const thought = raw.slice(0, raw.indexOf(close)).trim();
    const format = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] };
    const body = { model: "closer", messages: question, format, options: { ...options, num_predict: 40 } };
    const once = (await (await postJson(`${url}/api/chat`, { ...body, stream: false })).json()) as {
      message: { content: string; thinking?: string };
      eval_count: number;
    };
    t.equal(once.message.thinking?.trim(), thought, "the thought as the model wrote it unconstrained");
    t.type(JSON.parse(once.message.content).ok, "boolean", `the answer under the format: ${once.message.content}`);
    const lines = await readNdjson(await postJson(`${url}/api/chat`, body));
    const joined = (key: "content" | "thinking") => lines.map((l) => (l.message as { content: string; thinking?: string })[key] ?? "").join("");
    t.same([joined("thinking"), joined("content")], [once.message.thinking, once.message.content], "streamed alike");
    // think: false, or no thought tags: the format applies at once.
    const off = (await (await postJson(`${url}/api/chat`, { ...body, think: false, stream: false })).json()) as {
      message: { content: string; thinking?: string };
    };
    t.type(JSON.parse(off.message.content).ok, "boolean");
    t.equal(off.message.thinking, undefined);
  });
});
