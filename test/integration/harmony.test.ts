/**
 * gpt-oss as Ollama serves it: a model of the gpt-oss family whose Go template writes harmony's
 * tags thinks (capability, `think` levels, never a 400), names its tools as identifiers, and its
 * output is split by the harmony parser — the thought a last assistant turn leaves open goes on as
 * `thinking`, an open answer as content, a `format` answer is the final message. The model is a
 * tiny random one with harmony's tokens (test/helpers/harmony.ts); what it writes is noise, but it
 * goes where harmony says, token for token (each token's text from its logprobs).
 */
import t from "tap";
import { postJson, readNdjson, startDaemon } from "../helpers/daemon.js";
import { question, tools } from "../helpers/family-chat.js";
import { HARMONY_TEMPLATE, harmonyModel } from "../helpers/harmony.js";

const options = { temperature: 0, num_predict: 12, seed: 7 };

t.test("gpt-oss through its Go template, as Ollama serves it", async (t) => {
  const make = await harmonyModel();
  const { url } = await startDaemon(t, {
    models: [
      { name: "oss", make, install: { architecture: "gptoss", template: HARMONY_TEMPLATE } },
      { name: "other", make, install: { architecture: "llama", template: HARMONY_TEMPLATE } },
    ],
  });
  const post = async (path: string, body: Record<string, unknown>) => {
    const res = await postJson(`${url}${path}`, { stream: false, ...body });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON answer whose fields the assertions read by path
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  const render = async (body: Record<string, unknown>, path = "/api/chat") => {
    const r = await post(path, { model: "oss", _debug_render_only: true, ...body });
    t.equal(r.status, 200, JSON.stringify(r.body));
    return r.body["_debug_info"].rendered_template as string;
  };

  t.test("it thinks, and has tools (Ollama's Capabilities: the family)", async (t) => {
    t.same((await post("/api/show", { model: "oss" })).body["capabilities"], ["completion", "tools", "thinking"]);
    t.same((await post("/api/show", { model: "other" })).body["capabilities"], ["completion", "tools"], "the same template in another family");
    const refused = await post("/api/chat", { model: "other", messages: question, think: true });
    t.same(refused, { status: 400, body: { error: '"other" does not support thinking' } });
  });

  t.test("think: unset and true are medium, a level is itself (max: high), false leaves the level out and is no error", async (t) => {
    t.match(await render({ messages: question }), /\n\nReasoning: medium\n\n/);
    t.match(await render({ messages: question, think: true }), /\n\nReasoning: medium\n\n/);
    t.match(await render({ messages: question, think: "high" }), /\n\nReasoning: high\n\n/);
    t.match(await render({ messages: question, think: "max" }), /\n\nReasoning: high\n\n/, "max is high for harmony (as Ollama)");
    t.notMatch(await render({ messages: question, think: false }), /Reasoning/);
    t.match(
      await render({ prompt: "Hi", think: "low" }, "/api/generate"),
      /\n\nReasoning: low\n\n.*<\|start\|>user<\|message\|>Hi<\|end\|><\|start\|>assistant$/s,
    );
    const chat = await post("/api/chat", { model: "oss", messages: question, think: false, options });
    t.equal(chat.status, 200, "think: false runs");
  });

  t.test("tools are shown as identifiers", async (t) => {
    const renamed = [{ type: "function", function: { ...tools[0]!.function, name: "get-weather.now" } }];
    const prompt = await render({ messages: question, tools: renamed });
    t.match(prompt, "type get_weather_now = (_: {");
    t.notMatch(prompt, "get-weather.now");
  });

  /** A chat's thinking, content and the text of its tokens (logprobs), streamed or not. */
  const chat = async (messages: unknown[], stream: boolean, extra: Record<string, unknown> = {}) => {
    const res = await postJson(`${url}/api/chat`, { model: "oss", messages, stream, logprobs: true, options, ...extra });
    t.equal(res.status, 200);
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON lines whose fields the assertions read by path
    type Line = Record<string, any>;
    const lines = stream ? await readNdjson(res) : [(await res.json()) as Line];
    const joined = (f: (l: Line) => string | undefined) => lines.map((l) => f(l) ?? "").join("");
    return {
      thinking: joined((l) => l["message"]?.thinking),
      content: joined((l) => l["message"]?.content),
      tokens: joined((l) => (l["logprobs"] as { token: string }[] | undefined)?.map((x) => x.token).join("")),
      done: lines.at(-1)!,
    };
  };

  t.test("the thought a last assistant turn leaves open goes on as thinking", async (t) => {
    const messages = [...question, { role: "assistant", content: "", thinking: "Let me see" }];
    t.match(await render({ messages }), /<\|start\|>assistant<\|channel\|>analysis<\|message\|>Let me see$/);
    for (const stream of [false, true]) {
      const r = await chat(messages, stream);
      t.equal(r.done["done_reason"], "length");
      t.ok(r.tokens.length > 0);
      // The random model writes no harmony tags (checked): its whole output is the thought.
      t.notMatch(r.tokens, "<|end|>");
      t.equal(r.thinking, r.tokens, `stream: ${stream}`);
      t.equal(r.content, "");
    }
  });

  t.test("an answer a last assistant turn leaves open goes on as content", async (t) => {
    const messages = [...question, { role: "assistant", content: "In Paris" }];
    t.match(await render({ messages }), /<\|channel\|>final<\|message\|>In Paris$/);
    const r = await chat(messages, false);
    t.ok(r.tokens.length > 0);
    t.equal(r.content, r.tokens);
    t.equal(r.thinking, "");
  });

  t.test("output that opens no message is not content (Ollama's parser drops it)", async (t) => {
    const r = await chat(question, false);
    t.ok(r.tokens.length > 0);
    t.notMatch(r.tokens, "<|message|>");
    t.same([r.content, r.thinking], ["", ""]);
  });

  t.test("format: with think false (and on generate) the constrained answer is the final message", async (t) => {
    const format = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] };
    const r = await chat(question, false, { format, think: false, options: { ...options, num_predict: 40 } });
    t.equal(r.thinking, "");
    t.type(JSON.parse(r.content).ok, "boolean", r.content);
    // Thinking on: the first pass is unconstrained until the answer begins, which this model never writes (as Ollama).
    const thinking = await chat(question, false, { format, options: { ...options, num_predict: 40 } });
    t.notMatch(thinking.tokens, /^\s*\{/, "the first pass is not under the grammar");
    const g = await post("/api/generate", { model: "oss", prompt: "Hi", format, options: { ...options, num_predict: 40 } });
    t.type(JSON.parse(g.body["response"]).ok, "boolean", g.body["response"]);
  });
});
