/**
 * `capabilities` in /api/show and /api/tags say what a model can do, in Ollama's
 * words and by Ollama's rules (server/images.go): `completion` or `embedding`; `tools`, `insert`,
 * `thinking` from the template in effect (a Go template layer, else the GGUF's Jinja template).
 * And, as Ollama: an embedding-only model on /api/generate or /api/chat is a 400
 * `"<model>" does not support generate` / `... chat`, answered before anything is loaded; `tools`
 * on a model whose template shows none is a 400 `<full name> does not support tools` on every
 * surface that takes tools; a reranker's embeddings are a 400 `<full name> does not support embedding`.
 */
import { createHash } from "node:crypto";
import t from "tap";
import { installGguf } from "../../src/store/install.js";
import { MEDIA } from "../../src/store/store.js";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { buildGguf, kv } from "../helpers/crafted-gguf.js";
import { bertGguf } from "../helpers/encoder-models.js";

const JINJA_TOOLS_THINK =
  "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' %}<think></think>{% endif %}{{ m.content }}<|im_end|>\n{% endfor %}{% if tools %}{{ tools | tojson }}{% endif %}";
const GO_TOOLS = "{{ if .Tools }}{{ .Tools }}{{ end }}{{ range .Messages }}{{ .Role }}: {{ .Content }}\n{{ end }}";
const GO_SUFFIX_THINK =
  "{{ range .Messages }}{{ if .Thinking }}<think>{{ .Thinking }}</think>{{ end }}{{ .Content }}{{ end }}{{ if .Suffix }}<PRE>{{ .Prompt }}<SUF>{{ .Suffix }}{{ end }}";

t.test("capabilities by Ollama's rules, in /api/show and /api/tags", async (t) => {
  const { url, app } = await startDaemon(t, {
    models: [
      { name: "plain" },
      { name: "chatml", make: { preset: "tiny", chatTemplate: "chatml" } },
      { name: "jinja-tools-think", make: { preset: "tiny", template: JINJA_TOOLS_THINK } },
    ],
  });
  await installGguf(app.services.store, "bge", await bertGguf(), { architecture: "bert", fileType: "Q8_0" });
  for (const [model, template] of [["go-tools", GO_TOOLS], ["go-suffix-think", GO_SUFFIX_THINK]] as const) {
    // A Go template layer takes over from the GGUF's Jinja template (which mentions tools and thoughts).
    const res = await postJson(`${url}/api/create`, { model, from: "jinja-tools-think", template, stream: false });
    t.equal(res.status, 200, `create ${model}`);
  }
  // A projector layer beside the model: Ollama says `vision`; lmd runs no projector and refuses
  // images on every model, so it must not say it can see.
  const clip = buildGguf({ kvs: [kv.str("general.architecture", "clip"), kv.str("general.name", "mmproj"), kv.u32("general.alignment", 32)] });
  const clipDigest = `sha256:${createHash("sha256").update(clip).digest("hex")}`;
  t.equal((await fetch(`${url}/api/blobs/${clipDigest}`, { method: "POST", body: clip })).status, 201);
  const plain = await app.services.store.findModel("plain");
  const modelDigest = plain?.manifest.layers.find((l) => l.mediaType === MEDIA.model)?.digest;
  const files = { "model.gguf": modelDigest, "mmproj.gguf": clipDigest };
  t.equal((await postJson(`${url}/api/create`, { model: "projector", files, stream: false })).status, 200, "create projector");
  await assertError(
    t,
    await postJson(`${url}/api/chat`, { model: "projector", messages: [{ role: "user", content: "What is it?", images: ["aGk="] }] }),
    400,
    "model 'projector' does not support images",
  );
  const expected: Record<string, string[]> = {
    plain: ["completion"],
    projector: ["completion"],
    chatml: ["completion"],
    "jinja-tools-think": ["completion", "tools", "thinking"],
    "go-tools": ["completion", "tools"],
    "go-suffix-think": ["completion", "insert", "thinking"],
    bge: ["embedding"],
  };
  for (const [model, caps] of Object.entries(expected)) {
    const show = (await (await postJson(`${url}/api/show`, { model })).json()) as { capabilities: string[] };
    t.same(show.capabilities, caps, `${model}: /api/show`);
  }
  const tags = (await (await fetch(`${url}/api/tags`)).json()) as { models: { name: string; capabilities: string[] }[] };
  for (const [model, caps] of Object.entries(expected)) {
    t.same(tags.models.find((m) => m.name === `${model}:latest`)?.capabilities, caps, `${model}: /api/tags`);
  }
});

t.test("an embedding model does not support generate or chat", async (t) => {
  const { url, app } = await startDaemon(t, { models: [] });
  await installGguf(app.services.store, "bge", await bertGguf(), { architecture: "bert", fileType: "Q8_0" });
  await assertError(t, await postJson(`${url}/api/generate`, { model: "bge", prompt: "hi" }), 400, '"bge" does not support generate');
  await assertError(t, await postJson(`${url}/api/generate`, { model: "bge", prompt: "" }), 400, '"bge" does not support generate');
  await assertError(t, await postJson(`${url}/api/chat`, { model: "bge", messages: [{ role: "user", content: "hi" }] }), 400, '"bge" does not support chat');
  await assertError(
    t,
    await postJson(`${url}/api/chat`, { model: "bge", messages: [{ role: "user", content: "hi" }], _debug_render_only: true }),
    400,
    '"bge" does not support chat',
  );
  await assertError(
    t,
    await postJson(`${url}/v1/chat/completions`, { model: "bge", messages: [{ role: "user", content: "hi" }] }),
    400,
    '"bge" does not support chat',
  );
  await assertError(t, await postJson(`${url}/v1/completions`, { model: "bge", prompt: "hi" }), 400, '"bge" does not support generate');
  const ps = (await (await fetch(`${url}/api/ps`)).json()) as { models: unknown[] };
  t.same(ps.models, [], "nothing was loaded");
  const unload = await postJson(`${url}/api/generate`, { model: "bge", prompt: "", keep_alive: 0, stream: false });
  t.equal(unload.status, 200, "the unload form works on any model, as in Ollama");
  const embed = await postJson(`${url}/api/embed`, { model: "bge", input: "hi" });
  t.equal(embed.status, 200, "it still embeds");
});

t.test("tools on a model without the tools capability are a 400, as Ollama's CheckCapabilities answers", async (t) => {
  const { url } = await startDaemon(t, {
    models: [
      { name: "chatml", make: { preset: "tiny", chatTemplate: "chatml" } },
      { name: "chatml-tools", make: { preset: "tiny", chatTemplate: "chatml-tools" } },
    ],
  });
  const show = async (model: string) => ((await (await postJson(`${url}/api/show`, { model })).json()) as { capabilities: string[] }).capabilities;
  t.same(await show("chatml"), ["completion"], "the demo's template (ChatML) shows no tools");
  t.same(await show("chatml-tools"), ["completion", "tools"]);
  const refused = "registry.ollama.ai/library/chatml:latest does not support tools";
  const fn = { name: "get_weather", parameters: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } };
  const messages = [{ role: "user", content: "Weather?" }];
  const requests: [string, Record<string, unknown>][] = [
    ["/api/chat", { messages, tools: [{ type: "function", function: fn }], stream: false }],
    ["/api/chat", { messages, tools: [{ type: "function", function: fn }], _debug_render_only: true }],
    ["/v1/chat/completions", { messages, tools: [{ type: "function", function: fn }], tool_choice: "required" }],
    ["/v1/chat/completions", { messages, tools: [{ type: "function", function: fn }], stream: true }],
    ["/v1/responses", { input: "Weather?", tools: [{ type: "function", ...fn }], tool_choice: "required" }],
    ["/v1/messages", { max_tokens: 8, messages, tools: [{ name: fn.name, input_schema: fn.parameters }], tool_choice: { type: "any" } }],
    ["/v1/messages/count_tokens", { messages, tools: [{ name: fn.name, input_schema: fn.parameters }] }],
  ];
  for (const [path, body] of requests) await assertError(t, await postJson(`${url}${path}`, { model: "chatml", ...body }), 400, refused);
  const ps = (await (await fetch(`${url}/api/ps`)).json()) as { models: unknown[] };
  t.same(ps.models, [], "refused before anything was loaded");

  const none = await postJson(`${url}/v1/chat/completions`, {
    model: "chatml",
    messages,
    tools: [{ type: "function", function: fn }],
    tool_choice: "none",
    max_tokens: 1,
  });
  t.equal(none.status, 200, "tool_choice none: the tools are not offered, nothing is refused");
  const plain = await postJson(`${url}/api/chat`, { model: "chatml", messages, stream: false, options: { num_predict: 1 } });
  t.equal(plain.status, 200, "without tools it chats");
  const capable = await postJson(`${url}/v1/chat/completions`, {
    model: "chatml-tools",
    messages,
    tools: [{ type: "function", function: fn }],
    tool_choice: "required",
    max_tokens: 40,
  });
  const body = (await capable.json()) as { choices: { message: { tool_calls?: { function: { name: string } }[] } }[] };
  t.equal(body.choices[0]?.message.tool_calls?.[0]?.function.name, "get_weather", "a template that shows tools gets the forced call");
});

t.test("a reranker does not embed: /api/embed, /api/embeddings and /v1/embeddings are a 400", async (t) => {
  const { url, app } = await startDaemon(t, { models: [] });
  await installGguf(app.services.store, "rr", await bertGguf({ pooling: "rank" }), { architecture: "bert", fileType: "Q8_0" });
  const show = (await (await postJson(`${url}/api/show`, { model: "rr" })).json()) as { capabilities: string[] };
  t.same(show.capabilities, ["reranking"]);
  const refused = "registry.ollama.ai/library/rr:latest does not support embedding";
  await assertError(t, await postJson(`${url}/api/embed`, { model: "rr", input: "hi" }), 400, refused);
  await assertError(t, await postJson(`${url}/api/embeddings`, { model: "rr", prompt: "hi" }), 400, refused);
  await assertError(t, await postJson(`${url}/v1/embeddings`, { model: "rr", input: ["hi"] }), 400, refused);
  const load = await postJson(`${url}/api/embed`, { model: "rr" });
  t.equal(load.status, 200, "the load form (no input) loads it, as on any model");
  const rerank = await postJson(`${url}/api/rerank`, { model: "rr", query: "q", documents: ["a", "b"] });
  t.equal(rerank.status, 200, "it still reranks");
});
