/**
 * The thread-count rule (src/cpu.ts): a load takes the usable cores that are free when it starts.
 * The rule as a table, then on this machine with a real busy process pinned to one CPU.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import os from "node:os";
import t from "tap";
import { autoThreads, busyCpus, chooseThreads, parseCpuList, parseCpuTimes, usableCores } from "../../src/cpu.js";

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

t.test("busy time counts only the CPUs lmd may run on (its affinity, a container's cpuset)", async (t) => {
  t.same([...parseCpuList("0-3,8,10-11")], [0, 1, 2, 3, 8, 10, 11], "a kernel CPU list");
  t.same([...parseCpuList("5\n")], [5], "one CPU, as /proc/self/status ends its line");
  // /proc/stat: user nice system idle iowait irq softirq steal …
  const stat = ["cpu  300 0 0 500 0 0 0 0", "cpu0 100 0 0 0 0 0 0 0", "cpu1 0 0 0 100 0 0 0 0", "cpu2 200 0 0 300 0 0 0 0", "intr 1 2 3"].join("\n");
  t.same(parseCpuTimes(stat), { busy: 300, total: 700, cpus: 3 }, "every CPU line, not the summary");
  t.same(parseCpuTimes(stat, new Set([1, 2])), { busy: 200, total: 600, cpus: 2 }, "only the allowed CPUs: a busy CPU 0 outside them takes nothing from lmd");
  const allowed = parseCpuList(readFileSync("/proc/self/status", "utf8").match(/^Cpus_allowed_list:\s*(.+)$/m)?.[1] ?? "");
  t.equal(allowed.size, os.availableParallelism(), `this process's list has as many CPUs as Node counts (${allowed.size})`);
  if (os.availableParallelism() < 2) return;
  // A process allowed only CPU 1 (taskset), a busy loop pinned to CPU 0: nothing it may use is busy.
  const hog = spawn("taskset", ["-c", "0", process.execPath, "-e", "const end = Date.now() + 20000; while (Date.now() < end);"], { stdio: "ignore" });
  t.teardown(() => void hog.kill("SIGKILL"));
  await new Promise((r) => setTimeout(r, 300));
  const cpu = new URL("../../dist/src/cpu.js", import.meta.url).href;
  const probe = spawn(
    "taskset",
    ["-c", "1", process.execPath, "--input-type=module", "-e", `const { busyCpus } = await import(${JSON.stringify(cpu)}); console.log(await busyCpus(500));`],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let out = "";
  probe.stdout.on("data", (d: Buffer) => (out += d));
  await new Promise((r) => probe.once("exit", r));
  t.ok(Number(out) < 0.5, `pinned to CPU 1 beside a busy CPU 0: ${Number(out).toFixed(2)} CPUs busy (the whole host: ~1)`);
});
