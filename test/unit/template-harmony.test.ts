/**
 * gpt-oss's harmony output, split as Ollama's harmony parser splits it (template/harmony.ts), and
 * the rules that choose it and the capabilities it gives.
 */
import t from "tap";
import { HttpError } from "../../src/errors.js";
import { capabilities } from "../../src/store/capabilities.js";
import { FunctionNames, HarmonyOutput, parseHeader, usesHarmony, type HarmonyParsed, type LastMessage } from "../../src/template/harmony.js";
import { HARMONY_TEMPLATE } from "../helpers/harmony.js";

/** Feeds `text` in pieces of `size` characters (0: one piece) and ends; the parts joined. */
function parse(text: string, size = 0, last?: LastMessage, names: string[] = []): HarmonyParsed {
  const h = new HarmonyOutput(last);
  for (const n of names) h.names.add(n);
  const all: HarmonyParsed = { thinking: "", content: "", calls: [] };
  const take = (p: HarmonyParsed) => {
    all.thinking += p.thinking;
    all.content += p.content;
    all.calls.push(...p.calls);
  };
  for (let i = 0; i < text.length; i += size || text.length) take(h.add(text.slice(i, i + (size || text.length))));
  take(h.end());
  return all;
}

const ANSWER = "<|channel|>analysis<|message|>The user greets me.<|end|><|start|>assistant<|channel|>final<|message|>Hello, <b>friend</b>!";
const CALL = '<|channel|>commentary to=functions.get_weather_now <|constrain|>json<|message|>{"city":"Paris","days":2}';

t.test("a thought and an answer split alike however the output is cut", async (t) => {
  for (const size of [0, 1, 2, 3, 5, 7, 11]) {
    t.same(parse(ANSWER, size), { thinking: "The user greets me.", content: "Hello, <b>friend</b>!", calls: [] }, `pieces of ${size}`);
  }
});

t.test("a body is handed out at once, but for a tail that may begin <|end|>", async (t) => {
  const h = new HarmonyOutput();
  t.same(h.add("<|channel|>final<|message|>Hi <|"), { thinking: "", content: "Hi ", calls: [] });
  t.same(h.add("e"), { thinking: "", content: "", calls: [] }, "<|e may still be <|end|>");
  t.same(h.add("x"), { thinking: "", content: "<|ex", calls: [] }, "it was not");
  t.same(h.add("<|end|>after"), { thinking: "", content: "", calls: [] }, "text after a message and before the next <|start|> is dropped");
  t.same(h.end(), { thinking: "", content: "", calls: [] });
});

t.test("channels: commentary without a recipient is content, an unknown channel keeps the last one, none is content", async (t) => {
  t.same(parse("<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant<|channel|>final<|message|>Done"), {
    thinking: "",
    content: "Checking.Done",
    calls: [],
  });
  t.same(
    parse("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|message|>b"),
    { thinking: "a", content: "b", calls: [] },
    "the state is reset at <|end|>",
  );
  t.same(parse("<|channel|>weird<|message|>x"), { thinking: "", content: "x", calls: [] });
  t.same(parse("plain text the model wrote without a header"), { thinking: "", content: "", calls: [] }, "never a <|message|>: nothing (as Ollama)");
  t.same(
    parse("noise<|start|>assistant<|channel|>final<|message|>ok"),
    { thinking: "", content: "ok", calls: [] },
    "a header's own text before <|message|> is never content",
  );
});

t.test("a tool call: the recipient's name mapped back, the arguments read at the end", async (t) => {
  const got = parse(`<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant${CALL}`, 4, undefined, ["get-weather.now"]);
  t.same(got, { thinking: "Need weather.", content: "", calls: [{ name: "get-weather.now", arguments: { city: "Paris", days: 2 } }] });
  t.same(
    parse('<|channel|>analysis to=python<|message|>{"code":"1+1"}').calls,
    [{ name: "python", arguments: { code: "1+1" } }],
    "analysis with a recipient is a call too",
  );
  t.same(
    parse("<|channel|>commentary to=functions.unknown <|constrain|>json<|message|>null").calls,
    [{ name: "unknown", arguments: {} }],
    "a name no tool had stays; null arguments are none",
  );
  const bad = (text: string) => {
    const err = (() => {
      try {
        parse(text);
      } catch (e) {
        return e;
      }
    })();
    t.ok(
      err instanceof HttpError && err.status === 500 && err.message.startsWith(`error parsing tool call: raw='${text.split("<|message|>")[1]}', err=`),
      String(err),
    );
  };
  bad('<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"city":');
  bad("<|channel|>commentary to=functions.f <|constrain|>json<|message|>[1]");
  bad("<|channel|>commentary to=functions.f <|constrain|>json<|message|>");
});

t.test("headers: role, channel and recipient in any order, <|constrain|> without its space", async (t) => {
  t.same(parseHeader("assistant<|channel|>analysis"), { role: "assistant", channel: "analysis", recipient: "" });
  t.same(parseHeader("assistant<|channel|>commentary to=functions.f <|constrain|>json"), {
    role: "assistant",
    channel: "commentary",
    recipient: "functions.f",
  });
  t.same(parseHeader("assistant to=functions.f<|channel|>commentary<|constrain|>json"), { role: "assistant", channel: "commentary", recipient: "functions.f" });
  t.same(parseHeader("to=functions.f<|channel|>commentary"), { role: "tool", channel: "commentary", recipient: "functions.f" });
  t.same(parseHeader(""), { role: "", channel: "", recipient: "" });
});

t.test("the prefill: a last assistant turn's open answer or thought is where the output goes on", async (t) => {
  t.same(parse(" it is sunny.", 0, { role: "assistant", content: "In Paris" }), { thinking: "", content: " it is sunny.", calls: [] });
  t.same(parse(" more thought<|end|><|start|>assistant<|channel|>final<|message|>Sunny.", 3, { role: "assistant", thinking: "Let me see" }), {
    thinking: " more thought",
    content: "Sunny.",
    calls: [],
  });
  t.same(
    parse("<|channel|>final<|message|>x", 0, { role: "user", content: "hi" }),
    { thinking: "", content: "x", calls: [] },
    "a user turn last: a new message",
  );
});

t.test("a constrained answer opens the final channel; what the prompt needs appended", async (t) => {
  const fresh = new HarmonyOutput();
  t.equal(fresh.openFinal(), "<|channel|>final<|message|>");
  t.same(fresh.add('{"a":1}'), { thinking: "", content: '{"a":1}', calls: [] });
  t.equal(new HarmonyOutput({ role: "assistant", content: "{" }).openFinal(), "", "the answer is already open");
  t.equal(
    new HarmonyOutput({ role: "assistant", thinking: "hm" }).openFinal(),
    "<|end|><|start|>assistant<|channel|>final<|message|>",
    "the open thought is closed first",
  );
});

t.test("tool names as harmony writes them, and back", async (t) => {
  const names = new FunctionNames();
  t.equal(names.add("get weather"), "get_weather");
  t.equal(names.add("get-weather"), "get_weather_2", "a second name that maps alike gets a number");
  t.equal(names.add("get.weather"), "get_weather_3");
  t.equal(names.add("1st"), "_1st");
  t.equal(names.add("!!!"), "unnamed");
  t.equal(names.add("café/ünïcode"), "caféünïcode", "letters of any script stay, other characters go");
  t.equal(names.add("$ref"), "$ref");
  t.equal(names.add("python"), "python", "the built-in tools keep their names");
  t.equal(names.add("browser.search"), "browser.search");
  t.equal(names.original("get_weather_2"), "get-weather");
  t.equal(names.original("caféünïcode"), "café/ünïcode");
  t.equal(names.original("nobody"), "nobody");
});

t.test("which models are harmony's, and what they can do", async (t) => {
  const harmonyTemplate = "<|start|>assistant<|message|>{{ .Prompt }}<|end|>";
  t.ok(usesHarmony({ template: harmonyTemplate, family: "gptoss", parser: "" }));
  t.ok(usesHarmony({ template: harmonyTemplate, family: "gpt-oss", parser: "" }));
  t.notOk(usesHarmony({ template: "<|start|>{{ .Prompt }}", family: "gptoss", parser: "" }), "a template without <|end|>");
  t.notOk(usesHarmony({ template: undefined, family: "gptoss", parser: "" }), "no Go template: the GGUF's chat template (node-llama-cpp's harmony wrapper)");
  t.notOk(usesHarmony({ template: harmonyTemplate, family: "llama", parser: "" }));
  t.ok(usesHarmony({ template: "{{ .Prompt }}", family: "llama", parser: "harmony" }), "a config that names the parser");

  t.same(capabilities(undefined, HARMONY_TEMPLATE, { family: "gptoss", parser: "" }), ["completion", "tools", "thinking"]);
  t.same(
    capabilities(undefined, HARMONY_TEMPLATE, { family: "llama", parser: "" }),
    ["completion", "tools"],
    "the template alone shows no thought tags",
  );
  t.same(
    capabilities(undefined, "{{ .Prompt }}", { family: "gpt-oss", parser: "" }),
    ["completion", "thinking"],
    "the family thinks whatever its template",
  );
  t.same(capabilities(undefined, "{{ .Prompt }}", { family: "", parser: "harmony" }), ["completion", "tools", "thinking"]);
});
