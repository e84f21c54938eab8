/**
 * The thread-count rule (src/cpu.ts): a load takes the usable cores that are free when it starts.
 * The rule as a table, then on this machine with a real busy process pinned to one CPU.
 */
import { spawn } from "node:child_process";
import os from "node:os";
import t from "tap";
import { autoThreads, busyCpus, chooseThreads, usableCores } from "../../src/cpu.js";

t.test("threads = clamp(round(usable − busy), 1, usable)", async (t) => {
  const cases: [number, number, number][] = [
    [2, 0.05, 2], // quiet 2 cores: both
    [2, 1.0, 1], // one core taken by another process: one thread
    [2, 1.6, 1], // both busy: still one (never zero)
    [4, 1.2, 3],
    [8, 0, 8],
    [1, 0.9, 1],
    [2, -0.1, 2], // never more than usable
  ];
  for (const [usable, busy, expected] of cases) t.equal(chooseThreads(usable, busy), expected, `usable ${usable}, busy ${busy} → ${expected}`);
});

t.test("a CPU hog pinned to one core is seen, and the rule leaves its core alone", async (t) => {
  const usable = usableCores();
  t.ok(usable >= 1 && usable <= os.availableParallelism(), `usable cores within affinity (${usable})`);
  if (os.availableParallelism() < 2) return t.skip("needs 2 CPUs");
  // A bounded busy loop pinned to CPU 0 (taskset), killed on teardown whatever happens.
  const hog = spawn("taskset", ["-c", "0", process.execPath, "-e", "const end = Date.now() + 20000; while (Date.now() < end);"], { stdio: "ignore" });
  t.teardown(() => void hog.kill("SIGKILL"));
  await new Promise((r) => setTimeout(r, 300));
  const busy = await busyCpus(500);
  t.ok(busy >= 0.8, `the hog's CPU counts as busy (${busy.toFixed(2)} CPUs)`);
  const chosen = await autoThreads();
  t.equal(chosen.threads, chooseThreads(chosen.usable, chosen.busy), "autoThreads applies the rule to what it measured");
  t.ok(chosen.threads <= Math.max(1, chosen.usable - 1), `with one core taken, at most usable − 1 threads (${chosen.threads} of ${chosen.usable})`);
});
