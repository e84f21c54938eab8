/**
 * A model's MESSAGE lines (the messages layer of `/api/create` and Modelfiles) stand in front of
 * every chat, as Ollama's ChatHandler puts them: the model's SYSTEM (unless the request opens with
 * a system message), the model's messages, then the request's. `/api/generate` puts them between
 * the system and the prompt unless a `context` continues a conversation. `/api/show` lists them.
 */
import t from "tap";
import { postJson, startDaemon } from "../helpers/daemon.js";

const TEMPLATE = "{{ range .Messages }}[{{ .Role }}] {{ .Content }}\n{{ end }}[assistant]";
const MESSAGES = [
  { role: "user", content: "Is it a pirate?" },
  { role: "assistant", content: "Arr, it is." },
];

type Rendered = { _debug_info: { rendered_template: string } };

t.test("the model's MESSAGE lines come before the request's messages", async (t) => {
  const { url } = await startDaemon(t, { models: [{ name: "base", make: { preset: "tiny", chatTemplate: "chatml" } }] });
  const create = (body: object) => postJson(`${url}/api/create`, { from: "base", stream: false, ...body });
  t.equal((await create({ model: "pirate", template: TEMPLATE, system: "Talk like a pirate.", messages: MESSAGES })).status, 200);
  t.equal((await create({ model: "pirate-gguf", system: "Talk like a pirate.", messages: MESSAGES })).status, 200);
  const render = async (path: string, body: object) => {
    const res = await postJson(`${url}${path}`, { ...body, _debug_render_only: true });
    t.equal(res.status, 200);
    return ((await res.json()) as Rendered)._debug_info.rendered_template;
  };

  t.test("chat through a Go template", async (t) => {
    const text = await render("/api/chat", { model: "pirate", messages: [{ role: "user", content: "Hello" }] });
    t.equal(text, "[system] Talk like a pirate.\n[user] Is it a pirate?\n[assistant] Arr, it is.\n[user] Hello\n[assistant]");
    const own = await render("/api/chat", { model: "pirate", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello" }] });
    t.equal(
      own,
      "[user] Is it a pirate?\n[assistant] Arr, it is.\n[system] Be brief.\n[user] Hello\n[assistant]",
      "a request that opens with its own system replaces the model's",
    );
  });

  t.test("generate puts them between the system and the prompt, not after a context", async (t) => {
    t.equal(
      await render("/api/generate", { model: "pirate", prompt: "Hello" }),
      "[system] Talk like a pirate.\n[user] Is it a pirate?\n[assistant] Arr, it is.\n[user] Hello\n[assistant]",
    );
    t.equal(await render("/api/generate", { model: "pirate", prompt: "Hello", context: [1, 2, 3] }), "[system] Talk like a pirate.\n[user] Hello\n[assistant]");
  });

  t.test("chat through the GGUF's own template (ChatML, rendered by node-llama-cpp)", async (t) => {
    const text = await render("/api/chat", { model: "pirate-gguf", messages: [{ role: "user", content: "Hello" }] });
    const order = ["Talk like a pirate.", "Is it a pirate?", "Arr, it is.", "Hello"].map((s) => text.indexOf(s));
    t.ok(
      order.every((at, i) => at >= 0 && (i === 0 || at > order[i - 1]!)),
      `system, the model's two messages, then the request's, in order (${order.join(", ")})`,
    );
    t.match(text, /<\|im_start\|>assistant\nArr, it is\.<\|im_end\|>/, "the model's assistant message is an assistant turn");
  });

  t.test("/v1/chat/completions sees them too", async (t) => {
    const res = await postJson(`${url}/v1/chat/completions`, {
      model: "pirate",
      messages: [{ role: "user", content: "Hello" }],
      max_tokens: 1,
      temperature: 0,
    });
    t.equal(res.status, 200);
    const usage = ((await res.json()) as { usage: { prompt_tokens: number } }).usage;
    const plain = await postJson(`${url}/v1/chat/completions`, {
      model: "base",
      messages: [{ role: "user", content: "Hello" }],
      max_tokens: 1,
      temperature: 0,
    });
    t.ok(
      usage.prompt_tokens > ((await plain.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens + 10,
      `the prompt carries the model's messages (${usage.prompt_tokens} tokens)`,
    );
  });

  t.test("/api/show lists them, and its Modelfile has the MESSAGE lines", async (t) => {
    const show = (await (await postJson(`${url}/api/show`, { model: "pirate" })).json()) as { messages?: unknown; modelfile: string };
    t.same(show.messages, MESSAGES);
    t.match(show.modelfile, /MESSAGE user (""")?Is it a pirate\?\1\nMESSAGE assistant (""")?Arr, it is\.\2\n/);
    const plain = (await (await postJson(`${url}/api/show`, { model: "base" })).json()) as { messages?: unknown };
    t.equal(plain.messages, undefined, "omitted when the model has none");
  });
});
