/**
 * /v1 reasoning as Ollama's openai layer maps it: `reasoning_effort` / `reasoning.effort` → `think`,
 * and an assistant message's `reasoning` → the turn's thoughts (a Go template's `.Thinking`).
 */
import t from "tap";
import type { OpenAIChatRequest } from "../../src/api/chat-types.js";
import { toThink, toTurns } from "../../src/routes/openai/convert.js";

const req = (extra: Partial<OpenAIChatRequest>): OpenAIChatRequest => ({ model: "m", messages: [{ role: "user", content: "hi" }], ...extra });

t.test("reasoning effort → think", async (t) => {
  t.equal(toThink(req({})), undefined, "absent: the model's default");
  t.equal(toThink(req({ reasoning_effort: "none" })), false);
  t.equal(toThink(req({ reasoning_effort: "minimal" })), "low");
  t.equal(toThink(req({ reasoning_effort: "medium" })), "medium");
  t.equal(toThink(req({ reasoning_effort: "xhigh" })), "max", "the tiers above high are max (as Ollama)");
  t.equal(toThink(req({ reasoning: { effort: "ultra" } })), "max");
  t.equal(toThink(req({ reasoning_effort: "max" })), "max");
  t.equal(toThink(req({ reasoning_effort: "low", reasoning: { effort: "high" } })), "high", "reasoning.effort wins, as in Ollama");
  t.throws(() => toThink(req({ reasoning_effort: "extreme" })), {
    status: 400,
    message: 'invalid reasoning value: "extreme" (must be "minimal", "low", "medium", "high", "xhigh", "ultra", "max", or "none")',
  });
});

t.test("an assistant message's reasoning becomes the turn's thinking", async (t) => {
  const turns = toTurns([{ role: "user", content: "q" }, { role: "assistant", content: "a", reasoning: "because" }], "m");
  t.same(turns[1], { role: "assistant", content: "a", thinking: "because" });
});
