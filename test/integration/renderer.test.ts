/**
 * Models whose config names one of Ollama's built-in renderers (Ollama's registry serves Qwen 3
 * Coder, Qwen 3.5 and others as `TEMPLATE {{ .Prompt }}` + `RENDERER …` + `PARSER …`): lmd has no
 * built-in renderers, so it renders them with their GGUF's chat template — never with the stub,
 * which would send the model the bare last message — and says so in /api/show. `/api/create` and
 * Modelfiles keep RENDERER and PARSER, and refuse what lmd could not honour.
 */
import t from "tap";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { HARMONY_TEMPLATE, harmonyModel } from "../helpers/harmony.js";

const question = [{ role: "system", content: "Be brief." }, { role: "user", content: "Weather in Paris?" }];
const CHATML = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n";

t.test("a model that names Ollama's renderer", async (t) => {
  const chatml = { preset: "tiny" as const, chatTemplate: "chatml" as const };
  const { url } = await startDaemon(t, {
    models: [
      { name: "coder", make: chatml, install: { template: "{{ .Prompt }}", renderer: "qwen3-coder", parser: "qwen3-coder" } },
      { name: "plain", make: chatml },
      { name: "bare", make: { preset: "tiny" } },
      { name: "oss", make: await harmonyModel(), install: { template: HARMONY_TEMPLATE } },
    ],
  });
  const post = async (path: string, body: Record<string, unknown>) => {
    const res = await postJson(`${url}${path}`, { stream: false, ...body });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON answer whose fields the assertions read by path
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  const rendered = async (model: string, body: Record<string, unknown>, path = "/api/chat") =>
    (await post(path, { model, _debug_render_only: true, ...body })).body["_debug_info"]?.rendered_template;

  t.test("is rendered with its GGUF's chat template, not the {{ .Prompt }} stub", async (t) => {
    t.equal(await rendered("coder", { messages: question }), CHATML);
    t.equal(await rendered("coder", { prompt: "Weather in Paris?", system: "Be brief." }, "/api/generate"), CHATML);
    const chat = await post("/api/chat", { model: "coder", messages: question, options: { temperature: 0, num_predict: 4 } });
    t.equal(chat.status, 200);
    t.equal(chat.body["eval_count"], 4);
    t.ok(chat.body["prompt_eval_count"] > 10, "the whole conversation, not the last message alone");
  });

  t.test("/api/show says so: the template in effect, the renderer and parser, a Modelfile that recreates it", async (t) => {
    const show = (await post("/api/show", { model: "coder" })).body;
    t.match(show["template"], /<\|im_start\|>/);
    t.same([show["renderer"], show["parser"]], ["qwen3-coder", "qwen3-coder"]);
    t.match(show["modelfile"], /\nTEMPLATE """\{\{ \.Prompt \}\}"""\nRENDERER qwen3-coder\nPARSER qwen3-coder\n/);
    t.same(show["capabilities"], (await post("/api/show", { model: "plain" })).body["capabilities"], "judged by the template it is rendered with");
    t.notOk("renderer" in (await post("/api/show", { model: "plain" })).body);
  });

  t.test("/api/create keeps RENDERER and PARSER, inherits them, and refuses what lmd cannot honour", async (t) => {
    t.equal((await post("/api/create", { model: "coder2", from: "coder", system: "Terse." })).status, 200);
    t.same(
      ((b) => [b["renderer"], b["parser"]])((await post("/api/show", { model: "coder2" })).body),
      ["qwen3-coder", "qwen3-coder"],
      "from a model: its renderer and parser carry over",
    );
    t.equal(
      await rendered("coder2", { messages: [{ role: "user", content: "Hi" }] }),
      "<|im_start|>system\nTerse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    );
    t.equal((await post("/api/create", { model: "coder3", from: "plain", template: "{{ .Prompt }}", renderer: "qwen3.5", parser: "qwen3.5" })).status, 200);
    t.equal(await rendered("coder3", { messages: question }), CHATML);

    t.same(await post("/api/create", { model: "x", from: "plain", parser: "qwen3-coder" }), {
      status: 400,
      body: { error: "parser 'qwen3-coder' is not built into lmd (only 'harmony' is); with a RENDERER the GGUF's chat template parses the output" },
    });
    t.same(await post("/api/create", { model: "x", from: "bare", renderer: "qwen3-coder" }), {
      status: 400,
      body: { error: "renderer 'qwen3-coder' is not built into lmd: such a model is rendered with its GGUF's chat template, and this GGUF has none" },
    });
    t.equal((await post("/api/show", { model: "x" })).status, 404, "nothing was written");
  });

  t.test("PARSER harmony on a model of another family: the harmony parser, thinking and tools", async (t) => {
    t.same((await post("/api/show", { model: "oss" })).body["capabilities"], ["completion", "tools"]);
    t.equal((await post("/api/create", { model: "oss2", from: "oss", parser: "harmony" })).status, 200);
    const show = (await post("/api/show", { model: "oss2" })).body;
    t.same([show["parser"], show["capabilities"]], ["harmony", ["completion", "tools", "thinking"]]);
    const messages = [...question, { role: "assistant", content: "", thinking: "Hmm" }];
    const chat = await post("/api/chat", { model: "oss2", messages, think: true, options: { temperature: 0, num_predict: 6 } });
    t.equal(chat.status, 200);
    t.ok(chat.body["message"].thinking.length > 0, "the open thought goes on as thinking");
  });
});
