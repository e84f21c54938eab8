/**
 * Saved prompt prefixes (SERVICE_CACHE_DIR) in the built daemon: a long prompt's evaluated state is
 * saved when its model unloads and restored after a restart or an eviction (the answer identical
 * under greedy sampling, prompt_eval_count showing the reuse); a state file from another model, a
 * truncated one and one with flipped bytes are discarded with a warning; the size cap removes the
 * least recently used.
 */
import { readdir, readFile, rename, stat, truncate, writeFile } from "node:fs/promises";
import path from "node:path";
import t, { type Test } from "tap";
import { ModelStore } from "../../src/store/store.js";
import { installTestModels } from "../helpers/models.js";
import { forkDaemon, type ForkedDaemon } from "../helpers/process.js";
import { postJson } from "../helpers/daemon.js";

const words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split(" ");
/** About 1,200 tokens of tiny's vocabulary: over SERVICE_CACHE_MIN_TOKENS' 1024, short of its 2048 context. */
const prompt = (offset = 0) => Array.from({ length: 450 }, (_, i) => words[(i + offset) % words.length]).join(" ");

interface Answer {
  response: string;
  prompt_eval_count: number;
  context: number[];
}

async function setup(t: Test): Promise<{ root: string; cache: string; start: (env?: Record<string, string>) => Promise<ForkedDaemon> }> {
  const root = t.testdir();
  const store = new ModelStore(path.join(root, "models"));
  await store.init();
  await installTestModels(store, [{ name: "tiny" }, { name: "other", make: { preset: "tiny", seed: 7 } }]);
  const cache = path.join(root, "cache");
  const start = (env: Record<string, string> = {}) =>
    forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: store.root, SERVICE_CACHE_DIR: cache, ...env });
  return { root, cache, start };
}

async function ask(t: Test, d: ForkedDaemon, model = "tiny", text = prompt()): Promise<Answer> {
  const res = await postJson(`${d.url}/api/generate`, { model, prompt: text, raw: true, stream: false, options: { temperature: 0, num_predict: 8 } });
  t.equal(res.status, 200, `${model}: 200`);
  return (await res.json()) as Answer;
}

async function stop(d: ForkedDaemon): Promise<void> {
  d.child.kill("SIGTERM");
  await d.exited;
}

const entries = async (dir: string) => (await readdir(dir)).filter((n) => n.endsWith(".state")).sort();

t.test("a saved prefix is restored after a restart and after an eviction", async (t) => {
  const { cache, start } = await setup(t);
  let d = await start();
  const first = await ask(t, d);
  const promptTokens = first.context.length - 8;
  // prompt_eval_count counts the BOS too.
  t.ok(promptTokens > 1024 && first.prompt_eval_count >= promptTokens, `the first answer evaluates its ${promptTokens} prompt tokens`);
  await stop(d);

  const saved = await entries(cache);
  t.equal(saved.length, 1, "the slot was saved when the daemon stopped");
  for (const name of await readdir(cache)) t.equal((await stat(path.join(cache, name))).mode & 0o777, 0o600, `${name} is 0600`);

  d = await start();
  const restored = await ask(t, d);
  t.ok(restored.prompt_eval_count < 8, `after a restart ${restored.prompt_eval_count} prompt tokens are evaluated (of ${promptTokens})`);
  t.equal(restored.response, first.response, "the same greedy answer as without the cache");
  t.same(restored.context, first.context);

  // An eviction (keep_alive 0 here) saves again; the next load restores.
  t.equal((await postJson(`${d.url}/api/generate`, { model: "tiny", prompt: "", keep_alive: 0 })).status, 200);
  const again = await ask(t, d);
  t.ok(again.prompt_eval_count < 8, `after an unload ${again.prompt_eval_count} prompt tokens are evaluated`);
  t.equal(again.response, first.response);
  await stop(d);
});

t.test("foreign, truncated and corrupt state files are discarded with a warning", async (t) => {
  const { cache, start } = await setup(t);
  let d = await start();
  const reference = await ask(t, d);
  await ask(t, d, "other");
  await stop(d);
  const [a, b] = await entries(cache);
  t.ok(a && b, "one entry for each model");
  const keyOf = (name: string) => name.split("-")[0] ?? "";
  const tinyEntry =
    (JSON.parse(await readFile(path.join(cache, a!.replace(/\.state$/, ".json")), "utf8")) as { tokens: number[] }).tokens.length === reference.context.length
      ? a!
      : b!;
  const otherEntry = tinyEntry === a ? b! : a!;
  const tinyBase = tinyEntry.replace(/\.state$/, "");
  const otherBase = otherEntry.replace(/\.state$/, "");

  const tryOnce = async (label: string, damage: () => Promise<void>, problem: RegExp) => {
    await damage();
    d = await start();
    const out = await ask(t, d);
    t.equal(out.prompt_eval_count, reference.prompt_eval_count, `${label}: the prompt is evaluated in full`);
    t.equal(out.response, reference.response, `${label}: the answer is right`);
    const warning = await d.waitForLog((l) => l.msg === "saved prompt prefix discarded", { timeoutMs: 10_000 });
    t.match(String(warning.problem), problem, `${label}: ${String(warning.problem)}`);
    t.equal(warning.level, 40, "a warning");
    await stop(d); // saves the slot again, whole
  };

  await tryOnce("flipped bytes", async () => {
    const file = path.join(cache, `${tinyBase}.state`);
    const bytes = await readFile(file);
    for (let i = 1000; i < bytes.length; i += 4099) bytes[i] = (bytes[i] ?? 0) ^ 0xff;
    await writeFile(file, bytes);
  }, /does not match its digest/);

  await tryOnce("truncated", () => truncate(path.join(cache, `${tinyBase}.state`), 4096), /is 4096 bytes/);

  // The other model's entry under this model's key: its metadata names another model.
  await tryOnce("another model's", async () => {
    const renamed = `${keyOf(tinyBase)}-${otherBase.split("-")[1] ?? ""}`;
    for (const ext of [".json", ".state"])
      await rename(path.join(cache, `${tinyBase}${ext}`), path.join(cache, `${tinyBase}.gone${ext}.x`)).catch(() => undefined);
    for (const ext of [".json", ".state"]) await rename(path.join(cache, `${otherBase}${ext}`), path.join(cache, `${renamed}${ext}`));
  }, /made for another model/);
});

t.test("the cap removes the least recently used entries", async (t) => {
  const { cache, start } = await setup(t);
  let d = await start();
  await ask(t, d, "tiny", prompt(0));
  await stop(d);
  const [oldest] = await entries(cache);
  const one = (await stat(path.join(cache, oldest!))).size;
  // Room for one entry and a half: the second save removes the first.
  d = await start({ SERVICE_CACHE_MAX: String(Math.floor(one * 1.5)) });
  await ask(t, d, "tiny", prompt(5));
  await stop(d);
  const left = await entries(cache);
  t.equal(left.length, 1, "one entry left");
  t.not(left[0], oldest, "the older one went");
});
