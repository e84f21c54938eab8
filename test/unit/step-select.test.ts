/**
 * Which waiting tokens a decode step takes (src/runner/step-select.ts), on requests alone (no
 * native code, no decode loop): generations first, prompts in their budget and in pieces, and the
 * single tokens deferred past a prompt's last piece at most once in a row.
 */
import t from "tap";
import { MIN_TOKENS } from "../../src/runner/prefill-budget.js";
import { selectStep, type Request } from "../../src/runner/step-select.js";

/** A request of `length` tokens of sequence `id`, `done` of them decoded. */
function request(id: number, length: number, done = 0): Request {
  return {
    sequence: { _sequenceId: id } as Request["sequence"],
    tokens: Array.from({ length }, (_, i) => i),
    done,
    sample: () => Promise.resolve(0),
    resolve: () => undefined,
    reject: () => undefined,
  };
}

/** A budget of `beside` prompt tokens while generations run, the whole batch otherwise. */
const budget = (beside: number) => ({ tokens: (size: number, generating: boolean) => (generating ? beside : size) });
/** A step as [sequence id, tokens] pairs. */
const shape = (items: { request: Request; count: number }[]) => items.map((i) => [i.request.sequence._sequenceId, i.count]);

t.test("prompts alone take the whole batch, in the order they came", async (t) => {
  const step = selectStep([request(1, 300), request(2, 300)], 512, budget(64), false);
  t.same(shape(step.items), [[1, 300], [2, 212]], "the first whole, the second up to the batch");
  t.equal(step.deferred, false);
});

t.test("generations go first; a prompt beside them takes its budget in a piece that goes on", async (t) => {
  const queue = [request(5, 1000), request(1, 1), request(2, 1)];
  const step = selectStep(queue, 512, budget(2 * MIN_TOKENS), false);
  t.same(shape(step.items), [[1, 1], [2, 1], [5, 2 * MIN_TOKENS]], "each generation's token, then the prompt's budget");
  t.equal(step.deferred, false, "a piece that goes on shares the step with the generations");
});

t.test("a budget below MIN_TOKENS takes no piece of a longer prompt", async (t) => {
  const step = selectStep([request(1, 1), request(5, 1000)], 512, budget(MIN_TOKENS / 2), false);
  t.same(shape(step.items), [[1, 1]], "the generation alone");
});

t.test("a prompt's last piece goes alone; the generations' tokens wait one step, never two", async (t) => {
  const queue = [request(1, 1), request(5, 100, 100 - MIN_TOKENS)];
  const first = selectStep(queue, 512, budget(2 * MIN_TOKENS), false);
  t.same(shape(first.items), [[5, MIN_TOKENS]], "the prompt's end alone");
  t.equal(first.deferred, true, "the generation's token deferred");
  const second = selectStep([request(1, 1), request(6, 100, 100 - MIN_TOKENS)], 512, budget(2 * MIN_TOKENS), first.deferred);
  t.same(shape(second.items), [[1, 1]], "after a deferral the generation goes alone, with no prompt beside it");
  t.equal(second.deferred, false);
});
