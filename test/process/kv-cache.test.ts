/**
 * The KV cache's type and flash attention in the built daemon, and load settings compared as they
 * take effect: a q8_0 model serves and `/api/ps` says so, its memory is below the same model's f16
 * load, and `num_ctx` values that all cap to the trained context are one load.
 */
import { writeFile } from "node:fs/promises";
import path from "node:path";
import t from "tap";
import { ModelStore } from "../../src/store/store.js";
import { installTestModels } from "../helpers/models.js";
import { forkDaemon } from "../helpers/process.js";
import { postJson } from "../helpers/daemon.js";

interface PsModel {
  name: string;
  size: number;
  context_length: number;
  kv_cache_type: string;
  flash_attention: string | boolean;
  policy?: Record<string, unknown>;
}

const ps = async (url: string): Promise<PsModel[]> => ((await (await fetch(`${url}/api/ps`)).json()) as { models: PsModel[] }).models;

t.test("q8_0 and f16 caches side by side; capped num_ctx values are one load", async (t) => {
  const dir = t.testdir();
  const store = new ModelStore(path.join(dir, "models"));
  await store.init();
  // The same GGUF under two names, so the cache type is the only difference between their loads
  // (the demo shape: q8_0 blocks of 32 need heads of a multiple of 32; tiny's are 16 wide).
  await installTestModels(store, [{ name: "plain", make: { preset: "demo" } }, { name: "quant", make: { preset: "demo" } }, { name: "narrow" }]);
  const policyFile = path.join(dir, "models.yaml");
  await writeFile(
    policyFile,
    "models:\n  quant:\n    kv_cache_type: q8_0\n    num_parallel: 4\n  plain:\n    num_parallel: 4\n  narrow:\n    kv_cache_type: q8_0\n",
  );
  const d = await forkDaemon(t, {
    SERVICE_HOST: "127.0.0.1:0",
    SERVICE_MODELS: store.root,
    SERVICE_MODELS_CONFIG: policyFile,
    SERVICE_MAX_LOADED_MODELS: "2",
    SERVICE_THREADS: "1",
  });
  const generate = async (model: string, options: Record<string, unknown> = {}) => {
    const res = await postJson(`${d.url}/api/generate`, {
      model,
      prompt: "the quick brown fox",
      raw: true,
      stream: false,
      options: { temperature: 0, num_predict: 16, num_ctx: 4096, ...options },
    });
    t.equal(res.status, 200, `${model}: 200`);
    return (await res.json()) as { response: string; context: number[] };
  };

  const f16 = await generate("plain");
  const q8 = await generate("quant");
  const models = await ps(d.url);
  const plain = models.find((m) => m.name === "plain:latest");
  const quant = models.find((m) => m.name === "quant:latest");
  t.equal(plain?.kv_cache_type, "f16", "the default cache is f16");
  t.equal(plain?.flash_attention, "auto", "and flash attention is left to llama.cpp");
  t.equal(quant?.kv_cache_type, "q8_0", "the policy's q8_0 cache is loaded");
  t.equal(quant?.flash_attention, true, "a quantized cache loads with flash attention on");
  t.same(quant?.policy, { num_parallel: 4, pinned: false, preload: false, options: {}, kv_cache_type: "q8_0", flash_attention: true });
  t.ok(quant && plain && quant.size < plain.size, `q8_0 load ${quant?.size} bytes < f16 load ${plain?.size} bytes`);
  t.ok(quant && quant.size > 0, "sizes reported");
  // Random weights make near-ties between logits, so a quantized cache may pick another token
  // somewhere; the answer is still generated from the same prompt.
  let same = 0;
  while (same < f16.context.length && f16.context[same] === q8.context[same]) same++;
  t.comment(`greedy tokens identical for ${same} of ${f16.context.length} context tokens (prompt included)`);
  t.ok(q8.response.length > 0, "the q8_0 cache generates");

  // The demo's trained context is 4096: 4096, unset (SERVICE_CONTEXT_LENGTH's 4096) and 5000 all load 4096.
  const loads = () => d.lines.filter((l) => l.msg === "model loaded").length;
  const loadsBefore = loads();
  await generate("plain", { num_ctx: 5000 });
  await generate("plain", { num_ctx: undefined });
  await generate("plain", { num_ctx: 4096 });
  await generate("plain", { num_ctx: 5000 });
  t.equal(loads(), loadsBefore, "no reload for a num_ctx that caps to the loaded context");
  t.equal((await ps(d.url)).find((m) => m.name === "plain:latest")?.context_length, 4096, "/api/ps shows the capped context");
  const capNotes = (model: string) => d.lines.filter((l) => l.msg === "context length capped to the model's trained context" && l.model === model);
  t.equal(capNotes("plain:latest").length, 0, "the load asked for 4096: nothing was capped");

  // A load over the trained context says so, once per model.
  await generate("quant", { num_ctx: 9000 });
  t.equal(loads(), loadsBefore, "9000 on the loaded 4096 context: no reload");
  const unload = async (model: string) =>
    t.equal((await postJson(`${d.url}/api/generate`, { model, prompt: "", keep_alive: 0 })).status, 200, `${model} unloaded`);
  await unload("quant");
  await generate("quant", { num_ctx: 9000 });
  await generate("quant", { num_ctx: 8000 });
  t.equal(loads(), loadsBefore + 1, "9000 then 8000 are one load (both 4096)");
  await unload("quant");
  await generate("quant", { num_ctx: 9000 });
  t.equal(capNotes("quant:latest").length, 1, "the cap is logged once per model");
  t.equal(capNotes("quant:latest")[0]?.contextLength, 4096);
  t.equal(capNotes("quant:latest")[0]?.requested, 9000);

  // A cache type the model cannot take fails its load with the setting and llama.cpp's reason; the daemon carries on.
  const res = await postJson(`${d.url}/api/generate`, { model: "narrow", prompt: "hi", stream: false });
  t.equal(res.status, 500);
  const body = (await res.json()) as { error: string };
  t.match(body.error, /^failed to load model 'narrow:latest': .*\(kv cache type q8_0, flash attention true: .*does not divide n_embd_head_k=16\)$/);
  t.equal(
    (await postJson(`${d.url}/api/generate`, { model: "plain", prompt: "hi", stream: false, options: { num_predict: 2 } })).status,
    200,
    "other models still serve",
  );
});

t.test("a quantized cache with flash attention off is refused", async (t) => {
  const dir = t.testdir();
  const policyFile = path.join(dir, "models.yaml");
  await writeFile(policyFile, "models:\n  quant:\n    kv_cache_type: q4_0\n    flash_attention: false\n");
  const d = await forkDaemon(
    t,
    { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: path.join(dir, "models"), SERVICE_MODELS_CONFIG: policyFile },
    { waitListening: false },
  );
  const { code } = await d.exited;
  t.equal(code, 78, "exit 78: configuration to fix");
  t.match(d.stderr(), /\/models\/quant: a q4_0 KV cache needs flash attention/);
});
