/**
 * The rule by which a runner changes its threads while it serves (src/runner/threads.ts), as a
 * table, and what two looks at the CPUs say (other processes' CPUs, the decoding threads' wait).
 * The rule on a real runner with a real busy process: test/integration/threadpool.test.ts.
 */
import t from "tap";
import { CONTENDED, loadBetween, nextThreads, OTHERS_BUSY, ROOM, sample, ThreadGovernor, type CpuSample, type Load } from "../../src/runner/threads.js";

t.test("fewer threads when a decoding thread waits and others are busy; more when there is room", async (t) => {
  const load = (others: number, wait: number, decoding = true): Load => ({ others, wait, decoding });
  const cases: [number, number, Load, number, string][] = [
    [2, 2, load(0.05, 0.1), 2, "quiet 2 cores: both"],
    [2, 2, load(0.6, 0.45), 1, "a hog pinned to one core (it gets half of it, a thread waits half the time): one"],
    [2, 2, load(0.15, 0.3), 2, "a thread waits but nobody else is busy (the runner's own work): no change"],
    [2, 2, load(0.8, 0.1), 2, "others busy but no thread waits (they use the other CPUs): no change"],
    [2, 2, load(0.9, 0.5, false), 2, "not decoding (the window was mostly idle): no judgement"],
    [2, 1, load(1.0, 0.05), 1, "one thread beside the hog: stays"],
    [2, 1, load(0.1, 0.01), 2, "the hog left: back to two"],
    [2, 1, load(0.5, 0.01), 1, "a neighbour of half a core: one thread (no room for another)"],
    [2, 1, load(0.1, 0.01, false), 2, "room is judged without decoding too"],
    [16, 16, load(4.2, 0.3), 12, "16 cores, 4 busy elsewhere: the load rule's count"],
    [16, 16, load(0.5, 0.25), 15, "16 cores, half a core busy elsewhere: one fewer"],
    [16, 12, load(0.2, 0.02), 16, "16 cores quiet again: all"],
    [16, 12, load(3.5, 0.02), 12, "16 cores, 12 + 3.5 busy leave less than the room for one more: stays"],
    [1, 1, load(1.5, 0.9), 1, "never below one"],
  ];
  for (const [usable, current, l, expected, what] of cases)
    t.equal(nextThreads(current, usable, l), expected, `${what} (${current} of ${usable} → ${expected})`);
  t.equal(nextThreads(2, 2, load(OTHERS_BUSY, CONTENDED)), 1, "the thresholds are inclusive");
  t.equal(nextThreads(2, 1, load(2 - 1 - ROOM, 0)), 2, "exactly the room for one more thread");
});

t.test("two samples: other processes' CPUs, and the wait of the busiest threads", async (t) => {
  const at = (ms: number, busy: number, own: number, threads: [string, number, number][]): CpuSample => ({
    at: ms,
    busy,
    total: ms / 10 * 2, // 2 CPUs, jiffies of 10 ms
    cpus: 2,
    own,
    threads: new Map(threads.map(([tid, run, wait]) => [tid, { run, wait }])),
  });
  const ms = 1e6; // ns
  const a = at(0, 0, 0, [["1", 0, 0], ["2", 0, 0], ["3", 0, 0]]);
  // 1 s: 190 busy jiffies of 200, 120 of them this runner's and its daemon's: 0.7 CPUs elsewhere.
  const b = at(1000, 190, 120, [["1", 60 * ms, 5 * ms], ["2", 900 * ms, 10 * ms], ["3", 500 * ms, 480 * ms], ["4", 1 * ms, 0]]);
  const two = loadBetween(a, b, 2);
  t.equal(two.others.toFixed(2), "0.70", "others: all CPUs' busy time less lmd's");
  t.equal(two.wait.toFixed(3), (480 / 980).toFixed(3), "the largest wait share among the 2 busiest threads (the main thread's is not theirs)");
  t.equal(two.decoding, true, "the busiest thread ran most of the window");
  t.equal(loadBetween(a, b, 1).wait.toFixed(3), (10 / 910).toFixed(3), "with one thread, only the busiest counts");
  const idle = at(1000, 20, 10, [["1", 60 * ms, 0], ["2", 100 * ms, 0]]);
  t.equal(loadBetween(a, idle, 2).decoding, false, "threads that ran a tenth of the window: no generation went on");
  t.equal(loadBetween(a, at(1000, 50, 120, []), 2).others, 0, "never below zero (lmd's own time read after /proc/stat's)");
});

t.test("a sample of this process reads /proc", async (t) => {
  const s = sample();
  t.ok(s.cpus >= 1 && s.total > 0 && s.busy > 0, `CPUs ${s.cpus}, jiffies ${s.busy} of ${s.total}`);
  t.ok(s.own > 0 || s.threads.size > 0, "this process's time");
  t.ok(s.threads.has(String(process.pid)), "the main thread is among the threads");
});

t.test("the governor: changes by the rule, skips the window after a change, and never throws", async (t) => {
  const ms = 1e6; // ns
  // Scripted looks 10 ms apart on 2 CPUs: a hog arrives (others 0.8, a thread waiting 45 %), stays,
  // leaves. The look after the change straddles it and reads as quiet: it must not count.
  let at = 0;
  let busy = 0;
  let own = 0;
  const run = new Map<string, { run: number; wait: number }>([["1", { run: 0, wait: 0 }], ["2", { run: 0, wait: 0 }]]);
  const script: [number, number, number][] = [[0.8, 0.45, 2], [0.8, 0.45, 2], [0.1, 0.01, 1], [1.0, 0.05, 1], [1.0, 0.05, 1], [0.1, 0.01, 1], [0.1, 0.01, 2]];
  let step = 0;
  const next = (): CpuSample => {
    const [others, wait, threads] = script[Math.min(step++, script.length - 1)]!;
    at += 10;
    own += threads; // jiffies of 10 ms: one per thread
    busy += threads + others;
    for (const [tid, r] of run) if (Number(tid) <= threads) run.set(tid, { run: r.run + 10 * ms * (1 - wait), wait: r.wait + 10 * ms * wait });
    return { at, busy, total: at / 10 * 2, cpus: 2, own, threads: new Map([...run].map(([k, v]) => [k, { ...v }])) };
  };
  const applied: [number, number][] = [];
  const logged: string[] = [];
  let active = true;
  const governor = new ThreadGovernor({
    usable: 2,
    threads: 2,
    active: () => active,
    apply: async (n) => void applied.push([n, step]),
    log: (msg) => logged.push(msg),
    sample: next,
    intervalMs: 10,
  });
  governor.wake();
  for (const end = Date.now() + 10_000; step < 8 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 10));
  active = false;
  await new Promise((r) => setTimeout(r, 30));
  t.same(applied.map(([n]) => n), [1, 2], "2 → 1 beside the hog, back to 2 once it left");
  t.same(applied.map(([, look]) => look), [2, 6], "at the second look, and at the sixth: the third, straddling the change, was not judged");
  t.equal(logged.filter((m) => m === "threads changed").length, 2, "each change logged");
  t.ok(step >= 6, `it looked while a job ran (${step} looks)`);
  const looks = step;
  await new Promise((r) => setTimeout(r, 50));
  t.equal(step, looks, "no job: it stopped looking");

  const broken = new ThreadGovernor({
    usable: 2,
    threads: 2,
    active: () => true,
    apply: async () => t.fail("nothing to apply"),
    log: (msg) => logged.push(msg),
    sample: () => {
      throw new Error("EACCES: /proc/stat");
    },
    intervalMs: 10,
  });
  t.doesNotThrow(() => broken.wake(), "a job starts even where /proc cannot be read");
  broken.wake();
  t.equal(logged.filter((m) => m.startsWith("threads stay as loaded")).length, 1, "said once");
  t.equal(broken.threads, 2, "the threads stay as loaded");
});
