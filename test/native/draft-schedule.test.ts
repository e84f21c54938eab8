/**
 * The adaptive drafting rule of src/runner/speculative.ts (DraftSchedule, applied by
 * SwitchablePredictor): a draft that keeps being refused is consulted on fewer and fewer steps,
 * with drafts of one token; one that is accepted drafts longer and longer. The target is
 * simulated here as node-llama-cpp drives a predictor (it pushes each token it produces, and asks
 * for a new proposal once the accepted ones are used up); the real models are in
 * test/integration/speculative.test.ts.
 */
import t from "tap";
import type { Token } from "node-llama-cpp";
import { DraftSchedule, SwitchablePredictor, type ExactDraftPredictor } from "../../src/runner/speculative.js";

/** A draft model that proposes what `propose` says for the state it is given, up to the limit asked for. */
function fakeDraft(propose: (state: Token[]) => Token[]) {
  let state: Token[] = [];
  const calls: { at: number; limit: number; proposed: number }[] = [];
  const draft = {
    maxTokens: 12,
    reset: ({ stateTokens }: { stateTokens: Token[] }) => void (state = stateTokens.slice()),
    pushTokens: (tokens: Token[]) => void state.push(...tokens),
    predictTokens: async (limit: number) => {
      const out = propose(state).slice(0, limit);
      calls.push({ at: state.length, limit, proposed: out.length });
      return out;
    },
    stop: () => undefined,
    dispose: async () => undefined,
  };
  return { draft: draft as unknown as ExactDraftPredictor, calls };
}

/** Generates `n` tokens of `truth` (token i of the output is truth(i)) as node-llama-cpp's speculative loop would. */
async function generate(p: SwitchablePredictor, n: number, truth: (i: number) => Token, mode: "draft" | "off" = "draft"): Promise<void> {
  p.mode = mode;
  await p.reset({ stateTokens: [], evaluateOptions: {}, targetSequence: undefined as never });
  let produced = 0;
  while (produced < n) {
    const proposal = await p.predictTokens();
    // The target samples its own next token, then checks the proposal against what it would sample.
    let accepted = 0;
    while (accepted < proposal.length && proposal[accepted] === truth(produced + accepted)) accepted++;
    for (let i = 0; i <= accepted && produced < n; i++) p.pushTokens([truth(produced++)]);
  }
}

const truth = (i: number) => (1000 + i) as Token;

t.test("a draft that is always refused backs off: consulted on steps 0, 2, 5, 10, 19, 36 of 64, one token after the first", async (t) => {
  const { draft, calls } = fakeDraft((state) => Array.from({ length: 12 }, (_, i) => (5 + state.length + i) as Token));
  const p = new SwitchablePredictor(undefined, draft);
  await generate(p, 64, truth);
  t.same(calls.map((c) => c.at), [0, 2, 5, 10, 19, 36]);
  t.same(calls.map((c) => c.limit), [4, 1, 1, 1, 1, 1]);
  t.equal(p.consulted, 6);
  // Beyond 64 tokens the gap stops growing at 32.
  const fresh = fakeDraft((state) => Array.from({ length: 12 }, (_, i) => (5 + state.length + i) as Token));
  await generate(new SwitchablePredictor(undefined, fresh.draft), 200, truth);
  const at = fresh.calls.map((c) => c.at);
  t.same(at.slice(1).map((a, i) => a - at[i]!), [2, 3, 5, 9, 17, 33, 33, 33, 33]);
});

t.test("a refusal streak carries over to the slot's next generation with the draft; an acceptance starts afresh", async (t) => {
  let agree = false;
  const { draft, calls } = fakeDraft((state) => Array.from({ length: 12 }, (_, i) => (agree ? truth(state.length + i) : ((5 + state.length + i) as Token))));
  const p = new SwitchablePredictor(undefined, draft);
  await generate(p, 64, truth);
  t.same(calls.map((c) => c.at), [0, 2, 5, 10, 19, 36], "the slot's first generation");
  calls.length = 0;
  await generate(p, 64, truth);
  t.same(calls.map((c) => c.at), [0, 33], "the next: step 0, then the back-off where it was (32)");
  t.same(calls.map((c) => c.limit), [1, 1], "one-token drafts");
  calls.length = 0;
  await generate(p, 64, truth, "off");
  t.same(calls, [], "a generation without speculation consults nothing");
  await generate(p, 64, truth);
  t.same(calls.map((c) => c.at), [0, 33], "and leaves the streak as it was");
  calls.length = 0;
  agree = true;
  await generate(p, 64, truth);
  t.same(calls.map((c) => c.limit).slice(0, 3), [1, 2, 4], "a draft that starts agreeing: drafts double from one token");
  t.equal(calls[1]?.at, 2, "consulted again at once after the acceptance");
  calls.length = 0;
  await generate(p, 64, truth);
  t.same(calls.map((c) => c.limit).slice(0, 3), [4, 8, 12], "after an accepted generation the next starts afresh");
});

t.test("a draft that proposes nothing (nothing reached draft_p_min) backs off the same way", async (t) => {
  const { draft, calls } = fakeDraft(() => []);
  const p = new SwitchablePredictor(undefined, draft);
  await generate(p, 64, truth);
  t.same(calls.map((c) => c.at), [0, 2, 5, 10, 19, 36]);
});

t.test("a draft that is always accepted drafts on every free step, 4 then 8 then 12 tokens", async (t) => {
  const { draft, calls } = fakeDraft((state) => Array.from({ length: 12 }, (_, i) => truth(state.length + i)));
  const p = new SwitchablePredictor(undefined, draft);
  await generate(p, 64, truth);
  t.same(calls.map((c) => c.limit), [4, 8, 12, 12, 12, 12]);
  // Each accepted draft of k tokens yields k + 1 tokens: the next draft starts right after.
  t.same(calls.map((c) => c.at), [0, 5, 14, 27, 40, 53]);
});

t.test("an acceptance ends the back-off; a partial one cuts the next draft to one more than was accepted", async (t) => {
  const s = new DraftSchedule(12);
  const steps = (n: number) => Array.from({ length: n }, () => s.consult());
  t.equal(s.limit, 4);
  t.ok(s.consult());
  s.record(4, 0);
  t.same(steps(2), [false, true], "1 step skipped");
  s.record(1, 0);
  t.same(steps(3), [false, false, true], "then 2");
  s.record(1, 1);
  t.equal(s.limit, 2, "accepted whole: doubled");
  t.same(steps(2), [true, true], "no back-off after an acceptance");
  s.record(2, 2);
  s.record(4, 4);
  s.record(8, 8);
  t.equal(s.limit, 12, "capped at draft_max");
  s.record(12, 5);
  t.equal(s.limit, 6, "accepted in part: one more than accepted");
  s.record(6, 0);
  t.same(steps(2), [false, true], "a refusal after an acceptance backs off from 1 again");
});

t.test("prompt lookup: an empty lookup does not back off, a refused one does", async (t) => {
  let asked = 0;
  let refuse = false;
  const lookup = {
    reset: () => undefined,
    pushTokens: () => undefined,
    predictTokens: () => (asked++, refuse ? [7 as Token] : []),
    stop: () => undefined,
    updateInputTokens: () => undefined,
    dispose: async () => undefined,
  };
  const p = new SwitchablePredictor(lookup as never, undefined);
  p.mode = "lookup";
  await p.reset({ stateTokens: [], evaluateOptions: {}, targetSequence: undefined as never });
  for (let i = 0; i < 10; i++) {
    await p.predictTokens();
    p.pushTokens([truth(i)]);
  }
  t.equal(asked, 10, "asked at every step while it finds nothing");
  refuse = true;
  asked = 0;
  for (let i = 10; i < 20; i++) {
    await p.predictTokens();
    p.pushTokens([truth(i)]);
  }
  t.equal(asked, 3, "asked at steps 0, 2 and 5 of the next 10 while it is refused");
  // A refused lookup backs off within its generation only: the next prompt starts afresh.
  await p.reset({ stateTokens: [], evaluateOptions: {}, targetSequence: undefined as never });
  asked = 0;
  for (let i = 0; i < 10; i++) {
    await p.predictTokens();
    p.pushTokens([truth(i)]);
  }
  t.equal(asked, 3, "the next generation: asked at steps 0, 2 and 5 again");
});
