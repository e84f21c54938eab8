/**
 * The runner's outbox (src/runner/outbox.ts) on a clock and timers of the test's own, so that the
 * rules are checked exactly, without waiting: when gathered output is written relative to the decode
 * loop's steps and the SERVICE_STREAM_INTERVAL timer. test/native/runner-output.test.ts checks the
 * same through a real runner.
 */
import t from "tap";
import { Outbox } from "../../src/runner/outbox.js";
import type { FromRunner } from "../../src/runner/protocol.js";

function fixture(intervalMs = 10) {
  let clock = 0;
  let busy = false;
  const timers = new Map<number, { at: number; callback: () => void }>();
  let nextTimer = 1;
  const posted: FromRunner[] = [];
  const outbox = new Outbox({
    post: (msg) => posted.push(msg),
    now: () => clock,
    setTimer: (callback, ms) => (timers.set(nextTimer, { at: clock + ms, callback }), nextTimer++),
    clearTimer: (timer) => timers.delete(timer as number),
    busy: () => busy,
  });
  outbox.intervalMs = intervalMs;
  /** Moves the clock, firing the timers that come due, in order. */
  const advance = (ms: number) => {
    const end = clock + ms;
    for (;;) {
      const due = [...timers.entries()].filter(([, x]) => x.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      timers.delete(due[0]);
      clock = due[1].at;
      due[1].callback();
    }
    clock = end;
  };
  const chunk = (id: number, text: string): FromRunner => ({ type: "chunk", id, text });
  /** Each posted message as the texts it carries. */
  const written = () =>
    posted.map((m) => (m.type === "batch" ? m.messages.map((x) => (x.type === "chunk" ? x.text : x.type)) : [m.type === "chunk" ? m.text : m.type]));
  return { outbox, advance, chunk, written, setBusy: (b: boolean) => (busy = b) };
}

t.test("a job's first token goes at once; the next ones wait for the interval", async (t) => {
  const f = fixture();
  f.outbox.send(f.chunk(1, "a"));
  t.same(f.written(), [["a"]], "the first at once");
  f.outbox.send(f.chunk(1, "b"));
  f.advance(2);
  f.outbox.send(f.chunk(1, "c"));
  t.same(f.written(), [["a"]], "the next ones wait");
  f.advance(8);
  t.same(f.written(), [["a"], ["b", "c"]], "written together when the interval has passed since the oldest");
});

t.test("a step queued when the output would otherwise wait past the interval writes it", async (t) => {
  const f = fixture();
  f.outbox.send(f.chunk(1, "a"));
  f.outbox.send(f.chunk(1, "b"));
  f.advance(3);
  f.outbox.atDecode(3); // steps every 3 ms: 3 + 3 < 10, the next step comes first
  f.advance(3);
  f.outbox.atDecode(3);
  t.same(f.written(), [["a"]], "not yet after 6 ms");
  f.outbox.send(f.chunk(1, "c"));
  f.advance(2);
  f.outbox.atDecode(3); // 8 + 3 ≥ 10: the next step would come after the interval
  t.same(f.written(), [["a"], ["b", "c"]], "written with the step at 8 ms, before the timer");
  f.advance(20);
  t.same(f.written(), [["a"], ["b", "c"]], "and the timer writes nothing more");
});

t.test("a model slower than the interval gets each token at once", async (t) => {
  const f = fixture();
  f.outbox.send(f.chunk(1, "a"));
  for (const text of ["b", "c", "d"]) {
    f.outbox.send(f.chunk(1, text));
    f.outbox.atDecode(40); // a step per token of 40 ms, queued right after the token
  }
  t.same(f.written(), [["a"], ["b"], ["c"], ["d"]], "each token with the step that follows it");
});

t.test("the timer leaves the write to the next step once while a step runs, and writes after one more interval", async (t) => {
  const f = fixture();
  f.outbox.send(f.chunk(1, "a"));
  f.outbox.send(f.chunk(1, "b"));
  f.setBusy(true);
  f.advance(10);
  t.same(f.written(), [["a"]], "deferred while a step runs");
  f.advance(9);
  t.same(f.written(), [["a"]], "still waiting for the step");
  f.advance(1);
  t.same(f.written(), [["a"], ["b"]], "written at twice the interval when no step came");
  f.outbox.send(f.chunk(1, "c"));
  f.advance(10);
  f.setBusy(false);
  f.outbox.atDecode(1);
  t.same(f.written(), [["a"], ["b"], ["c"]], "or by the next step, once due");
});

t.test("other messages go at once, after the output gathered before them; 0 writes every token at once", async (t) => {
  const f = fixture();
  f.outbox.send(f.chunk(1, "a"));
  f.outbox.send(f.chunk(1, "b"));
  f.outbox.send(f.chunk(2, "x"));
  f.outbox.send(f.chunk(2, "y"));
  f.outbox.send({ type: "done", id: 1 } as FromRunner);
  // Job 2's first token and job 1's end each go at once, after what waits before them.
  t.same(f.written(), [["a"], ["b"], ["x"], ["y"], ["done"]], "in the order sent");
  f.outbox.send(f.chunk(1, "again"));
  t.same(f.written().at(-1), ["again"], "a job id that ended starts again with its first token at once");

  const zero = fixture(0);
  for (const text of ["a", "b", "c"]) zero.outbox.send(zero.chunk(1, text));
  t.same(zero.written(), [["a"], ["b"], ["c"]], "interval 0: each at once");
});

t.test("while several jobs stream the interval is times their number, at most four times, and shrinks as they end", async (t) => {
  const f = fixture();
  for (const id of [1, 2, 3]) f.outbox.send(f.chunk(id, `first ${id}`));
  f.outbox.send(f.chunk(1, "b"));
  f.outbox.send(f.chunk(2, "c"));
  f.advance(29);
  f.outbox.atDecode(0);
  t.equal(f.written().length, 3, "three jobs: not yet after 29 ms");
  f.advance(1);
  t.same(f.written().at(-1), ["b", "c"], "written at 30 ms");

  for (const id of [4, 5, 6]) f.outbox.send(f.chunk(id, `first ${id}`));
  f.outbox.send(f.chunk(1, "d"));
  f.advance(39);
  t.same(f.written().at(-1), ["first 6"], "six jobs: not yet after 39 ms");
  f.outbox.atDecode(1); // 39 + 1 ≥ 40: the step writes it
  t.same(f.written().at(-1), ["d"], "at most four times the interval");

  for (const id of [2, 3, 4, 5, 6]) f.outbox.send({ type: "done", id } as FromRunner);
  f.outbox.send(f.chunk(1, "e"));
  f.advance(10);
  t.same(f.written().at(-1), ["e"], "one job left: the interval again");
});

t.test("a step that carries a prompt's tokens (expected to take unbounded time) writes what waits before it", async (t) => {
  const f = fixture(10);
  for (const id of [1, 2, 3, 4]) f.outbox.send(f.chunk(id, `first ${id}`));
  f.outbox.send(f.chunk(1, "b"));
  f.advance(1);
  f.outbox.atDecode(5);
  t.same(f.written().at(-1), ["first 4"], "a short step: gathered on");
  f.outbox.atDecode(Infinity);
  t.same(f.written().at(-1), ["b"], "a prompt's step: written now, not after it");
});
