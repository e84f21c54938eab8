/**
 * Each of the 20 templates of Ollama's template/ folder, set as a model's TEMPLATE through
 * /api/create, renders the three conversations of Ollama's TestTemplate exactly as Ollama does,
 * through `_debug_render_only` on /api/chat; /api/generate renders the single-user case. Before,
 * generate answered 400 on `.Messages` templates and chat ignored the template layer.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import t from "tap";
import { lmd } from "../cli/cli.js";
import { postJson, startDaemon } from "../helpers/daemon.js";

const FIXTURES = join(import.meta.dirname, "../fixtures/ollama-templates");
const CONVERSATIONS: Record<string, { role: string; content: string }[]> = {
  user: [{ role: "user", content: "Hello, how are you?" }],
  "user-assistant-user": [
    { role: "user", content: "Hello, how are you?" },
    { role: "assistant", content: "I'm doing great. How can I help you today?" },
    { role: "user", content: "I'd like to show off how chat templating works!" },
  ],
  "system-user-assistant-user": [
    { role: "system", content: "You are a helpful assistant." },
    { role: "user", content: "Hello, how are you?" },
    { role: "assistant", content: "I'm doing great. How can I help you today?" },
    { role: "user", content: "I'd like to show off how chat templating works!" },
  ],
};
// Ollama's TestTemplate drops one trailing space from these templates' output before comparing.
const TRIM_TRAILING_SPACE = new Set(["chatqa.gotmpl", "llama2-chat.gotmpl", "mistral-instruct.gotmpl", "openchat.gotmpl", "vicuna.gotmpl"]);

async function rendered(res: Response): Promise<string> {
  const body = (await res.json()) as { _debug_info?: { rendered_template?: string }; error?: string };
  if (res.status !== 200) throw new Error(`status ${res.status}: ${body.error}`);
  return body._debug_info?.rendered_template ?? "<no _debug_info>";
}

t.test("Ollama's 20 templates as TEMPLATE render Ollama's expected prompts on /api/chat and /api/generate", async (t) => {
  const { url } = await startDaemon(t);
  const files = readdirSync(FIXTURES).filter((f) => f.endsWith(".gotmpl")).sort();
  t.equal(files.length, 20);
  for (const file of files) {
    const template = readFileSync(join(FIXTURES, file), "utf8").replaceAll("\r\n", "\n");
    // One name re-created with each template: the runner (same weights) stays loaded between them.
    const model = "templated";
    const created = await postJson(`${url}/api/create`, { model, from: "tiny", template, stream: false });
    t.equal(created.status, 200, `create ${model}`);
    const trim = (s: string) => (TRIM_TRAILING_SPACE.has(file) && s.endsWith(" ") ? s.slice(0, -1) : s);
    for (const [name, messages] of Object.entries(CONVERSATIONS)) {
      const expected = readFileSync(join(FIXTURES, "testdata", file, name), "utf8");
      const chat = await postJson(`${url}/api/chat`, { model, messages, _debug_render_only: true });
      t.equal(trim(await rendered(chat)), expected, `${file} ${name} (chat)`);
    }
    const generate = await postJson(`${url}/api/generate`, { model, prompt: "Hello, how are you?", _debug_render_only: true });
    t.equal(trim(await rendered(generate)), readFileSync(join(FIXTURES, "testdata", file, "user"), "utf8"), `${file} user (generate)`);
  }
});

t.test("_debug_render_only answers Ollama's shape and runs nothing; a GGUF (Jinja) template renders in the runner", async (t) => {
  const { url } = await startDaemon(t, { models: [{ name: "tiny", make: { preset: "tiny", chatTemplate: "chatml" } }] });
  const res = await postJson(`${url}/api/chat`, {
    model: "tiny",
    messages: [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Hi" },
    ],
    _debug_render_only: true,
  });
  t.equal(res.status, 200);
  const body = (await res.json()) as Record<string, unknown>;
  t.same(Object.keys(body).sort(), ["_debug_info", "created_at", "model"]);
  t.equal(body.model, "tiny");
  // The test model's GGUF carries a ChatML template.
  t.equal(
    (body._debug_info as { rendered_template: string }).rendered_template,
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
  );
  const gen = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "Hi", system: "Be brief.", _debug_render_only: true });
  t.equal(await rendered(gen), "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
});

t.test("/api/show's template is the one in effect: the layer's, else the GGUF's chat template; thinking templates say so", async (t) => {
  const { url } = await startDaemon(t, { models: [{ name: "tiny", make: { preset: "tiny", chatTemplate: "chatml" } }] });
  const show = async (model: string) => (await (await postJson(`${url}/api/show`, { model })).json()) as { template: string; capabilities: string[] };
  t.match((await show("tiny")).template, /^\{%- if tools %\}|\{% for message in messages %\}|<\|im_start\|>/, "the GGUF's tokenizer.chat_template");
  t.notOk((await show("tiny")).capabilities.includes("thinking"));
  const thinking = '{{ range .Messages }}{{ if .Thinking }}<think>{{ .Thinking }}</think>{{ end }}{{ .Content }}{{ end }}';
  t.equal((await postJson(`${url}/api/create`, { model: "thinker", from: "tiny", template: thinking, stream: false })).status, 200);
  const shown = await show("thinker");
  t.equal(shown.template, thinking);
  t.ok(shown.capabilities.includes("thinking"));
  const cli = await lmd(url, ["show", "thinker", "--template"]);
  t.equal(cli.stdout, `${thinking}\n`, "lmd show --template prints the same");
  t.match((await lmd(url, ["show", "tiny", "--template"])).stdout, /<\|im_start\|>/, "and the GGUF's template when there is no layer");
});

t.test("history that overflows the context drops the oldest turns, keeps the system message and the last one", async (t) => {
  const { url } = await startDaemon(t, { models: [{ name: "tiny", make: { preset: "tiny", chatTemplate: "chatml" } }] });
  const chatml = readFileSync(join(FIXTURES, "chatml.gotmpl"), "utf8");
  t.equal((await postJson(`${url}/api/create`, { model: "cml", from: "tiny", template: chatml, system: "Model system.", stream: false })).status, 200);
  const long = (n: number) => `turn ${n} `.repeat(12).trim();
  const messages = [1, 2, 3, 4, 5, 6].map((n) => ({ role: n % 2 ? "user" : "assistant", content: long(n) }));
  const render = async (num_ctx: number) =>
    rendered(await postJson(`${url}/api/chat`, { model: "cml", messages, options: { num_ctx }, _debug_render_only: true }));
  const all = await render(1024);
  t.match(all, /^<\|im_start\|>system\nModel system\.<\|im_end\|>\n<\|im_start\|>user\nturn 1 /, "fits: everything, the model's SYSTEM first");
  const cut = await render(160);
  t.match(cut, /^<\|im_start\|>system\nModel system\.<\|im_end\|>\n<\|im_start\|>/, "the system message stays");
  t.notMatch(cut, /turn 1 /, "the oldest turn is gone");
  t.match(cut, /turn 6 turn 6/, "the last message stays");
  t.ok(cut.length < all.length);
  // A last message that alone overflows the context is still sent (the runner then cuts its front).
  const huge = [...messages, { role: "user", content: "last ".repeat(600) }];
  const worst = await rendered(await postJson(`${url}/api/chat`, { model: "cml", messages: huge, options: { num_ctx: 256 }, _debug_render_only: true }));
  t.equal(
    worst,
    `<|im_start|>system\nModel system.<|im_end|>\n<|im_start|>user\n${"last ".repeat(600)}<|im_end|>\n<|im_start|>assistant\n`,
    "at worst: the system message and the last one",
  );
});

t.test("tools on a Go template that does not show .Tools are refused, as Ollama refuses them", async (t) => {
  const { url } = await startDaemon(t, { models: [{ name: "tiny", make: { preset: "tiny", chatTemplate: "chatml" } }] });
  t.equal(
    (await postJson(`${url}/api/create`, { model: "plain", from: "tiny", template: readFileSync(join(FIXTURES, "chatml.gotmpl"), "utf8"), stream: false }))
      .status,
    200,
  );
  const tools = [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }];
  const res = await postJson(`${url}/api/chat`, { model: "plain", messages: [{ role: "user", content: "Hi" }], tools, stream: false });
  t.equal(res.status, 400);
  t.same(await res.json(), { error: "registry.ollama.ai/library/plain:latest does not support tools" }, "in Ollama's words");
  const none = await postJson(`${url}/v1/chat/completions`, {
    model: "plain",
    messages: [{ role: "user", content: "Hi" }],
    tools,
    tool_choice: "none",
    max_tokens: 1,
  });
  t.equal(none.status, 200, "tool_choice none: no tools offered, nothing refused");
});
