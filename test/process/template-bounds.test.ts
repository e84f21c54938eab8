/**
 * A Go template cannot crash, freeze or bloat the daemon. The crash template (a few hundred bytes
 * that double a million characters eight times: 256 Mi characters, then padded) froze a daemon
 * for 15 s and killed it (heap out of memory); stored as a model's TEMPLATE, it killed it again on
 * every generate. A 64 Mi-character printf froze it for 16 s; twenty renders stopped by the step
 * limit held `/api/version` for seconds. Each is measured here on a forked daemon, with a poller
 * timing `/api/version` throughout.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import t from "tap";
import { ModelStore } from "../../src/store/store.js";
import { assertError } from "../helpers/assert-error.js";
import { postJson } from "../helpers/daemon.js";
import { installTestModels } from "../helpers/models.js";
import { forkDaemon, isAlive } from "../helpers/process.js";

const DOUBLE = "{{$a = print $a $a}}";
const CRASH = `{{$a := printf "%1000000s" "x"}}${DOUBLE.repeat(8)}{{printf "%s" $a}}`;
// 1 Mi characters (a width over a million is refused, as Go's fmt does), doubled six times.
const PRINTF_64MI = `{{$a := print (printf "%1000000s" "x") (printf "%48576s" "y")}}${DOUBLE.repeat(6)}{{printf "%s" $a}}`;
const STEPS = "{{ range 1000000000 }}{{ end }}";

/** Every answer time of /api/version, polled every 50 ms while `work` runs. */
async function versionTimesWhile(url: string, work: Promise<unknown>): Promise<number[]> {
  let done = false;
  void work.finally(() => (done = true));
  const times: number[] = [];
  do {
    const t0 = performance.now();
    // A frozen daemon does not answer at all: give up after 5 s and count that as the time.
    await fetch(`${url}/api/version`, { signal: AbortSignal.timeout(5_000) }).then((res) => res.text(), () => undefined);
    times.push(performance.now() - t0);
    await new Promise((r) => setTimeout(r, 50));
  } while (!done);
  return times;
}

const kib = (pid: number, field: "VmRSS" | "VmHWM"): number =>
  Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN);

t.test("hostile templates: a 400 each, the daemon alive, small and answering", async (t) => {
  const store = new ModelStore(path.join(t.testdir(), "models"));
  await store.init();
  await installTestModels(store, [{ name: "tiny" }]);
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: store.root });
  const pid = d.child.pid!;
  // A render first, so the render workers exist before the peak is taken.
  t.equal(
    (
      await postJson(`${d.url}/api/generate`, {
        model: "tiny",
        prompt: "hi",
        template: "{{ .Prompt }}",
        raw: false,
        stream: false,
        options: { num_predict: 1 },
      })
    ).status,
    200,
  );
  const before = kib(pid, "VmHWM");

  await t.test("the crash template on /api/generate", async (t) => {
    const res = postJson(`${d.url}/api/generate`, { model: "tiny", prompt: "hi", template: CRASH, stream: false });
    const times = await versionTimesWhile(d.url, res);
    await assertError(t, await res, 400, /template value exceeded 33554432 characters/);
    t.ok(isAlive(pid) && d.child.exitCode === null, "the daemon is alive");
    const grown = (kib(pid, "VmHWM") - before) / 1024;
    t.ok(grown < 256, `peak RSS grew ${grown.toFixed(0)} MiB (< 256)`);
    t.ok(Math.max(...times) < 1000, `/api/version answered within 1 s throughout (slowest ${Math.max(...times).toFixed(0)} ms)`);
  });

  await t.test("a 64 Mi-character printf", async (t) => {
    const res = postJson(`${d.url}/api/generate`, { model: "tiny", prompt: "hi", template: PRINTF_64MI, stream: false });
    const times = await versionTimesWhile(d.url, res);
    await assertError(t, await res, 400, /^template: template:1:\d+: executing "template" at <print>: template value exceeded 33554432 characters$/);
    t.ok(Math.max(...times) < 1000, `/api/version answered within 1 s throughout (slowest ${Math.max(...times).toFixed(0)} ms, ${times.length} polls)`);
  });

  await t.test("stored as a model's TEMPLATE: created, then every generate and chat is a 400", async (t) => {
    const created = await postJson(`${d.url}/api/create`, { model: "crash", from: "tiny", template: CRASH, stream: false });
    t.equal(created.status, 200, "it parses, so it is stored");
    for (let i = 0; i < 3; i++) {
      await assertError(t, await postJson(`${d.url}/api/generate`, { model: "crash", prompt: "hi", stream: false }), 400, /template value exceeded/);
      await assertError(
        t,
        await postJson(`${d.url}/api/chat`, { model: "crash", messages: [{ role: "user", content: "hi" }], stream: false }),
        400,
        /template value exceeded/,
      );
    }
    t.ok(isAlive(pid) && d.child.exitCode === null, "the daemon is alive");
  });

  await t.test("twenty renders stopped by the step limit at once", async (t) => {
    const all = Promise.all(
      Array.from({ length: 20 }, () => postJson(`${d.url}/api/generate`, { model: "tiny", prompt: "hi", template: STEPS, stream: false })),
    );
    const times = await versionTimesWhile(d.url, all);
    for (const res of await all) await assertError(t, res, 400, /template execution exceeded (5000000 steps|1000 ms)/);
    const sorted = [...times].sort((a, b) => a - b);
    const p99 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))]!;
    t.ok(
      sorted[sorted.length - 1]! < 1000,
      `/api/version: p99 ${p99.toFixed(0)} ms, slowest ${sorted[sorted.length - 1]!.toFixed(0)} ms over ${times.length} polls (each < 1 s)`,
    );
  });

  const grown = (kib(pid, "VmHWM") - before) / 1024;
  t.ok(grown < 256, `peak RSS over all of it grew ${grown.toFixed(0)} MiB (< 256)`);
  t.equal((await fetch(`${d.url}/api/version`)).status, 200);
});
