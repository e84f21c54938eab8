/**
 * LoRA adapters apply: `adapters` in /api/create and `ADAPTER` in a Modelfile (`lmd create`) are
 * stored as Ollama stores them (an adapter layer) and applied when the runner loads the model, so
 * greedy text changes; an adapter that cannot apply is a 400 at create, never stored and ignored.
 */
import { createHash } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import t from "tap";
import { installGguf } from "../../src/store/install.js";
import { lmd } from "../cli/cli.js";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { bertGguf, loraGguf } from "../helpers/encoder-models.js";
import { testGguf } from "../helpers/models.js";

// Several models resident at once: the comparisons below switch models often, reloads cost time.
const { url, app } = await startDaemon(t, { env: { SERVICE_MAX_LOADED_MODELS: "4" } }); // one tiny llama model named `tiny`
const base = await testGguf();

/** Uploads a file as a blob; returns its digest. */
async function upload(file: string): Promise<string> {
  const data = await readFile(file);
  const digest = `sha256:${createHash("sha256").update(data).digest("hex")}`;
  const res = await fetch(`${url}/api/blobs/${digest}`, { method: "POST", body: data });
  if (res.status !== 201 && res.status !== 200) throw new Error(`upload failed: ${res.status}`);
  return digest;
}

async function greedy(model: string): Promise<string> {
  const res = await postJson(`${url}/api/generate`, {
    model,
    prompt: "Once upon a time",
    stream: false,
    options: { temperature: 0, num_predict: 12, seed: 1 },
  });
  t.equal(res.status, 200);
  return ((await res.json()) as { response: string }).response;
}

t.test("an adapter from /api/create changes the model's greedy output", async (t) => {
  const lora = await loraGguf({ base });
  const digest = await upload(lora);
  const res = await postJson(`${url}/api/create`, { model: "tiny-lora", from: "tiny", adapters: { "lora.gguf": digest }, stream: false });
  t.equal(res.status, 200, await res.clone().text());
  const manifest = (await app.services.store.findModel("tiny-lora"))!.manifest;
  t.same(manifest.layers.filter((l) => l.mediaType === "application/vnd.ollama.image.adapter").map((l) => l.digest), [digest], "stored as an adapter layer");

  const plain = await greedy("tiny");
  const adapted = await greedy("tiny-lora");
  t.ok(plain.length > 0 && adapted.length > 0);
  t.not(adapted, plain, `the adapter applies: '${plain}' became '${adapted}'`);
  t.equal(await greedy("tiny-lora"), adapted, "and stays deterministic");
  t.equal(await greedy("tiny"), plain, "the base model is unchanged");

  const show = (await (await postJson(`${url}/api/show`, { model: "tiny-lora" })).json()) as { modelfile: string };
  const blob = app.services.store.blobPath(digest);
  t.match(show.modelfile, new RegExp(`^ADAPTER ${blob.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`, "m"), "the modelfile lists the adapter");
});

t.test("a loaded model whose adapters change on disk is reloaded with them", async (t) => {
  // Another program (Ollama itself, on a shared store) may rewrite a manifest while lmd serves it.
  const store = app.services.store;
  await installGguf(store, "swap", base, { fileType: "Q8_0" });
  const plain = await greedy("tiny");
  const before = await greedy("swap"); // loaded now (and stays: nothing else is asked for in between)
  t.equal(before, plain, "the same weights without an adapter");
  const { manifest } = (await store.findModel("swap"))!;
  const adapter = await store.addBlobFromFile(await loraGguf({ base }), "application/vnd.ollama.image.adapter");
  await store.writeManifest("swap", { ...manifest, layers: [...manifest.layers, adapter] });
  t.not(await greedy("swap"), before, "the next request runs with the adapter");
});

t.test("ADAPTER in a Modelfile through lmd create", async (t) => {
  const dir = t.testdir({});
  await writeFile(path.join(dir, "Modelfile"), "FROM tiny\nADAPTER ./style.gguf\n");
  await writeFile(path.join(dir, "style.gguf"), await readFile(await loraGguf({ base, seed: 11 })));
  const r = await lmd(url, ["create", "tiny-style", "-f", path.join(dir, "Modelfile")]);
  t.equal(r.code, 0, r.stderr);
  t.not(await greedy("tiny-style"), await greedy("tiny"), "the Modelfile's adapter applies");
});

t.test("an adapter that cannot apply is a 400 at create", async (t) => {
  const create = async (file: string, name = "bad.gguf") =>
    postJson(`${url}/api/create`, { model: "bad", from: "tiny", adapters: { [name]: await upload(file) }, stream: false });
  const dir = t.testdir({});
  const junk = path.join(dir, "junk.gguf");
  await writeFile(junk, "not a gguf file at all, just text");
  await assertError(t, await create(junk), 400, "invalid GGUF file 'bad.gguf': not a GGUF file");
  await assertError(t, await create(base), 400, "invalid adapter 'bad.gguf': not a LoRA adapter (general.type is missing, expected 'adapter')");
  const bertLora = await loraGguf({ base: await bertGguf() });
  await assertError(t, await create(bertLora), 400, "invalid adapter 'bad.gguf': adapter architecture 'bert' does not match the model's 'llama'");
  const wider = await loraGguf({ base: await testGguf({ preset: "tiny", embeddingLength: 96, heads: 4, kvHeads: 4 }) });
  await assertError(
    t,
    await create(wider),
    400,
    /^invalid adapter 'bad\.gguf': tensor 'blk\.0\.attn_q\.weight' has shape \[64, 64\] in the model, which lora_a \[96, 8\] and lora_b \[8, 96\] do not fit$/,
  );
  t.equal(await app.services.store.findModel("bad"), undefined, "nothing was stored");
});

t.test("a LoRA adapter for the BERT encoder changes its embeddings", async (t) => {
  const bert = await bertGguf();
  await installGguf(app.services.store, "bge-tiny", bert, { architecture: "bert", fileType: "Q8_0" });
  const digest = await upload(await loraGguf({ base: bert }));
  const res = await postJson(`${url}/api/create`, { model: "bge-lora", from: "bge-tiny", adapters: { "bge-lora.gguf": digest }, stream: false });
  t.equal(res.status, 200, await res.clone().text());
  const embed = async (model: string) =>
    ((await (await postJson(`${url}/api/embed`, { model, input: "hello world" })).json()) as { embeddings: number[][] }).embeddings[0]!;
  const [plain, adapted] = [await embed("bge-tiny"), await embed("bge-lora")];
  t.equal(adapted.length, plain.length);
  t.ok(Math.max(...plain.map((x, i) => Math.abs(x - adapted[i]!))) > 1e-3, "the adapter applies to embeddings too");
});
