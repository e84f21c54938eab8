/**
 * The runner child's job start and end (src/runner/child/job.ts), which every job kind shares: the
 * answer to each way a job ends, the job table that `cancel`, `pause` and `resume` reach, and what a
 * job holds given back however it ends. The loaded model is a stand-in with a slot list (no model is
 * loaded; job.ts imports node-llama-cpp only as types), and so is the host's out-of-memory test; the
 * job kinds themselves run against real runners in test/integration.
 */
import t from "tap";
import { JobFailure, JobTable, withJob, type Job, type JobHost, type JobKind } from "../../src/runner/child/job.js";
import type { LoadedModel, Slot } from "../../src/runner/child/model.js";
import type { FromRunner } from "../../src/runner/protocol.js";

const modelFile = "/var/lib/lmd/models/blobs/sha256-0123";

function fixture(options: { loaded?: boolean; slots?: number } = {}) {
  const sent: FromRunner[] = [];
  const logged: Array<{ level: string; msg: string }> = [];
  const slots = Array.from({ length: options.slots ?? 1 }, () => ({ busy: false, lastUsed: 0 }) as unknown as Slot);
  const model = {
    modelFile,
    takeSlot: () => {
      const slot = slots.find((s) => !s.busy);
      if (slot) slot.busy = true;
      return Promise.resolve(slot ? { slot, cached: 0 } : undefined);
    },
  } as unknown as LoadedModel;
  const jobs = new JobTable();
  const host: JobHost = {
    io: { send: (msg) => sent.push(msg), log: (level, msg) => logged.push({ level, msg }) },
    jobs,
    loaded: () => (options.loaded === false ? undefined : model),
    outOfMemory: (err) => err instanceof Error && err.message === "the engine is out of memory",
  };
  return { host, jobs, sent, logged, slots };
}

const kind: JobKind = { what: "generation", pausable: true, cancelled: (id) => ({ type: "failed", id, kind: "other", message: "cancelled here" }) };

t.test("no model loaded: failed at once, the body never runs", async (t) => {
  const { host, sent } = fixture({ loaded: false });
  let ran = false;
  await withJob(host, 1, kind, () => void (ran = true));
  t.equal(ran, false);
  t.same(sent, [{ type: "failed", id: 1, kind: "other", message: "model is not loaded" }]);
});

t.test("a JobFailure is answered with its kind and message, not logged", async (t) => {
  const { host, sent, logged } = fixture();
  await withJob(host, 2, kind, () => {
    throw new JobFailure("invalid", "the request cannot be run");
  });
  t.same(sent, [{ type: "failed", id: 2, kind: "invalid", message: "the request cannot be run" }]);
  t.same(logged, []);
});

t.test("an unexpected error is logged and answered without the store's absolute path", async (t) => {
  const { host, sent, logged } = fixture();
  await withJob(host, 3, kind, () => Promise.reject(new Error(`cannot read ${modelFile}`)));
  t.same(sent, [{ type: "failed", id: 3, kind: "other", message: "cannot read sha256-0123" }]);
  t.same(logged, [{ level: "error", msg: "generation failed" }]);
});

t.test("an error the host counts as out of memory is answered as such", async (t) => {
  const { host, sent } = fixture();
  await withJob(host, 4, kind, () => Promise.reject(new Error("the engine is out of memory")));
  t.same(sent, [{ type: "failed", id: 4, kind: "memory", message: "out of memory" }]);
});

t.test("cancel aborts the job's signal; an error after it is the kind's cancel answer", async (t) => {
  const { host, jobs, sent } = fixture();
  let signal: AbortSignal | undefined;
  const running = withJob(host, 5, kind, async (j) => {
    signal = j.signal;
    await new Promise((_, reject) => j.signal.addEventListener("abort", () => reject(new Error("aborted"))));
  });
  t.equal(signal?.aborted, false);
  jobs.cancel(5);
  await running;
  t.equal(signal?.aborted, true);
  t.same(sent, [{ type: "failed", id: 5, kind: "other", message: "cancelled here" }]);
});

t.test("a kind without a cancel answer answers the error itself", async (t) => {
  const { host, jobs, sent } = fixture();
  const stopped = (j: Job) => new Promise<void>((_, reject) => j.signal.addEventListener("abort", () => reject(new Error("stopped"))));
  const running = withJob(host, 6, { what: "embedding" }, stopped);
  jobs.cancel(6);
  await running;
  t.same(sent, [{ type: "failed", id: 6, kind: "other", message: "stopped" }]);
});

t.test("the slot is held by the job's pause switch and given back last, however the job ends", async (t) => {
  for (const ending of ["done", "failure", "error"] as const) {
    const { host, jobs, slots } = fixture();
    const order: string[] = [];
    let held: Slot | undefined;
    let pausedWhileHeld = false;
    await withJob(host, 7, kind, async (j: Job) => {
      const { slot } = await j.takeSlot([]);
      held = slot;
      j.defer(() => order.push(`first deferred, slot busy: ${String(slot.busy)}`));
      j.defer(() => order.push("second deferred"));
      jobs.pause(7);
      pausedWhileHeld = slot.pause?.waiting !== undefined;
      jobs.resume(7);
      if (ending === "failure") throw new JobFailure("invalid", "no");
      if (ending === "error") throw new Error("boom");
    });
    t.equal(pausedWhileHeld, true, `${ending}: pause reaches the slot's switch`);
    t.same(order, ["second deferred", "first deferred, slot busy: true"], `${ending}: cleanups in reverse order, the slot after them`);
    t.equal(held?.busy, false, `${ending}: slot free`);
    t.equal(held?.pause, undefined, `${ending}: slot has no pause switch`);
    t.equal(slots[0]?.busy, false);
  }
});

t.test("no free slot is a failure of kind other", async (t) => {
  const { host, sent, slots } = fixture({ slots: 1 });
  if (slots[0]) slots[0].busy = true;
  await withJob(host, 8, kind, async (j) => void (await j.takeSlot([])));
  t.same(sent, [{ type: "failed", id: 8, kind: "other", message: "no free slot in the runner" }]);
  t.equal(slots[0]?.busy, true, "the other job's slot is left alone");
});

t.test("an ended job is out of the table: a late cancel or pause reaches nothing", async (t) => {
  const { host, jobs } = fixture();
  let signal: AbortSignal | undefined;
  await withJob(host, 9, kind, (j) => void (signal = j.signal));
  jobs.cancel(9);
  jobs.pause(9);
  t.equal(signal?.aborted, false);
});

t.test("abortAll aborts every running job and resolves once all have ended", async (t) => {
  const { host, jobs } = fixture({ slots: 2 });
  const ended: number[] = [];
  const job = (id: number) =>
    withJob(host, id, { what: "chat" }, async (j) => {
      await new Promise<void>((resolve) => j.signal.addEventListener("abort", () => resolve()));
      await new Promise((resolve) => setImmediate(resolve)); // an aborted job still finishes its step
      ended.push(id);
    });
  void job(10);
  void job(11);
  await jobs.abortAll();
  t.same(ended.sort(), [10, 11]);
});
