/**
 * Ollama's chatPrompt (server/prompt.go) on its own, with a counting tokenizer: the oldest messages
 * go first, system messages from the dropped part are kept, the last message always stays, and the
 * tokenizer is not asked while the rendering's bytes fit the context.
 */
import t from "tap";
import { parseTemplate } from "../../src/template/index.js";
import { fitHistory, thinkValues } from "../../src/template/history.js";

const tmpl = parseTemplate("{{ range .Messages }}[{{ .Role }}]{{ .Content }}{{ end }}");
const words = async (s: string) => s.split(/\s+|(?=\[)/).filter(Boolean).map(() => 0);
const msgs = [
  { role: "system", content: "sys" },
  { role: "user", content: "one two three" },
  { role: "assistant", content: "four five six" },
  { role: "system", content: "later system" },
  { role: "user", content: "seven eight" },
];

t.test("drops from the front, keeping system messages and the last one", async (t) => {
  const all = "[system]sys[user]one two three[assistant]four five six[system]later system[user]seven eight";
  t.same(await fitHistory(tmpl, { messages: msgs, numCtx: 1000, tokenize: words }), { prompt: all, dropped: 0 });
  // 11 "tokens" in all; 8 once the first user turn is dropped (the system message kept).
  t.same(await fitHistory(tmpl, { messages: msgs, numCtx: 10, tokenize: words }), {
    prompt: "[system]sys[assistant]four five six[system]later system[user]seven eight",
    dropped: 2,
  });
  t.same(
    await fitHistory(tmpl, { messages: msgs, numCtx: 2, tokenize: words }),
    { prompt: "[system]sys\n\nlater system[user]seven eight", dropped: 4 },
    "at worst the system messages (now adjacent: collated) and the last",
  );
  t.same(await fitHistory(tmpl, { messages: msgs, numCtx: 2, tokenize: words, truncate: false }), { prompt: all, dropped: 0 });
});

t.test("the tokenizer is asked only when the bytes exceed the context", async (t) => {
  let asked = 0;
  const counting = async (s: string) => (asked++, words(s));
  await fitHistory(tmpl, { messages: msgs, numCtx: 200, tokenize: counting });
  t.equal(asked, 0);
  await fitHistory(tmpl, { messages: msgs, numCtx: 20, tokenize: counting });
  t.ok(asked > 0);
});

t.test("think values as Ollama's ThinkValue gives them to the template", async (t) => {
  t.same(thinkValues(undefined), { think: false, thinkLevel: "", isThinkSet: false });
  t.same(thinkValues(true), { think: true, thinkLevel: "medium", isThinkSet: true });
  t.same(thinkValues(false), { think: false, thinkLevel: "", isThinkSet: true });
  t.same(thinkValues("high"), { think: true, thinkLevel: "high", isThinkSet: true });
});
