/**
 * Speculative decoding through the daemon: a target model with a draft (`draft` on create, DRAFT in
 * a Modelfile) and prompt lookup give exactly the greedy output of plain decoding. The pair is
 * the identity-layer pair make-model writes (the target computes what the draft computes, with more
 * layers), so nearly every draft token is accepted; an unrelated draft is refuted but changes nothing,
 * and backs off (it is consulted on fewer and fewer steps).
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import t from "tap";
import { assertError } from "../helpers/assert-error.js";
import { buildGguf, kv } from "../helpers/crafted-gguf.js";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { testGguf } from "../helpers/models.js";

// repeat_penalty 1 in every request: a draft proposes greedily without penalties (as llama.cpp's
// drafts do), so with penalties the identity pair would disagree where a penalty moves the argmax.
const shape = { preset: "tiny", layers: 2, seed: 7 } as const;

interface Final {
  response: string;
  context: number[];
  eval_count: number;
  draft_count?: number;
  draft_accepted_count?: number;
}

async function greedy(url: string, model: string, options: Record<string, unknown> = {}): Promise<Final> {
  const res = await postJson(`${url}/api/generate`, {
    model,
    prompt: "the quick brown fox jumps over the lazy dog and the quick brown",
    raw: true,
    stream: false,
    options: { temperature: 0, repeat_penalty: 1, num_predict: 48, ...options },
  });
  if (res.status !== 200) throw new Error(`${res.status}: ${await res.text()}`);
  return (await res.json()) as Final;
}

t.test("draft model and prompt lookup: identical greedy output, acceptance reported", async (t) => {
  const { url } = await startDaemon(t, {
    env: { SERVICE_MAX_LOADED_MODELS: "1" },
    models: [
      { name: "draft", make: shape },
      { name: "target", make: { ...shape, identityLayers: 4 } },
      { name: "unrelated", make: { ...shape, seed: 99 } },
    ],
  });
  for (const [model, draft] of [["target-spec", "draft"], ["target-unrelated", "unrelated"]] as const) {
    const res = await postJson(`${url}/api/create`, { model, from: "target", draft, parameters: { draft_p_min: 0 }, stream: false });
    t.equal(res.status, 200, `created ${model} with draft ${draft}`);
  }
  t.equal((await postJson(`${url}/api/create`, { model: "target-lookup", from: "target", parameters: { prompt_lookup: true }, stream: false })).status, 200);

  const plain = await greedy(url, "target");
  t.equal(plain.draft_count, undefined, "no speculation without a draft or lookup");
  t.ok(plain.eval_count > 0);

  const spec = await greedy(url, "target-spec");
  t.same(spec.context, plain.context, "with its draft: the same tokens as plain greedy decoding");
  t.equal(spec.response, plain.response);
  t.ok((spec.draft_count ?? 0) > 0, `draft tokens were checked (${spec.draft_count})`);
  t.ok(
    (spec.draft_accepted_count ?? 0) / (spec.draft_count ?? 1) > 0.8,
    `the identity pair's drafts are accepted (${spec.draft_accepted_count}/${spec.draft_count})`,
  );

  const off = await greedy(url, "target-spec", { speculative: false });
  t.same(off.context, plain.context, "speculative: false gives the same tokens");
  t.equal(off.draft_count, undefined, "and checks no draft tokens");

  const unrelated = await greedy(url, "target-unrelated");
  t.same(unrelated.context, plain.context, "an unrelated draft changes nothing in the output");
  t.ok(
    (unrelated.draft_accepted_count ?? 0) < (spec.draft_accepted_count ?? 0),
    `and is accepted less (${unrelated.draft_accepted_count}/${unrelated.draft_count})`,
  );
  // Refused drafts back off (src/runner/speculative.ts): far fewer draft tokens than generated
  // ones, where drafting at every step would check up to 12 per generated token.
  t.ok(
    (unrelated.draft_count ?? 0) < unrelated.eval_count / 2,
    `a refused draft backs off (${unrelated.draft_count} draft tokens for ${unrelated.eval_count} generated)`,
  );
  t.ok((spec.draft_count ?? 0) >= spec.eval_count / 2, `an accepted draft keeps drafting (${spec.draft_count} draft tokens for ${spec.eval_count} generated)`);

  const lookup = await greedy(url, "target-lookup");
  t.same(lookup.context, plain.context, "prompt lookup gives the same tokens");
  t.type(lookup.draft_count, "number", "prompt lookup reports what it checked");
});

t.test("a draft that is not in the store is refused at create", async (t) => {
  const { url } = await startDaemon(t);
  await assertError(
    t,
    await postJson(`${url}/api/create`, { model: "x", from: "tiny", draft: "nope", stream: false }),
    404,
    "model 'nope' not found, try pulling it first",
  );
  await assertError(
    t,
    await postJson(`${url}/api/create`, { model: "x", from: "tiny", parameters: { draft: "nope" }, stream: false }),
    404,
    "model 'nope' not found, try pulling it first",
  );
});

t.test("Ollama's DRAFT file: a draft layer from draft_files, shown as DRAFT, capped by draft_num_predict", async (t) => {
  const { url } = await startDaemon(t, { env: { SERVICE_MAX_LOADED_MODELS: "1" }, models: [{ name: "target", make: { ...shape, identityLayers: 4 } }] });
  const file = await readFile(await testGguf(shape));
  const digest = `sha256:${createHash("sha256").update(file).digest("hex")}`;
  t.equal((await fetch(`${url}/api/blobs/${digest}`, { method: "POST", body: file })).status, 201);
  const res = await postJson(`${url}/api/create`, {
    model: "target-file",
    from: "target",
    draft_files: { "draft.gguf": digest },
    parameters: { draft_p_min: 0 },
    stream: false,
  });
  t.equal(res.status, 200, await res.text());

  const plain = await greedy(url, "target");
  const spec = await greedy(url, "target-file");
  t.same(spec.context, plain.context, "the same tokens as plain greedy decoding");
  t.ok((spec.draft_count ?? 0) >= spec.eval_count / 2, `the draft layer drafts (${spec.draft_count} draft tokens for ${spec.eval_count} generated)`);
  // draft_num_predict 1: one draft token per step at most, where the pair's drafts grow to 12.
  const capped = await greedy(url, "target-file", { draft_num_predict: 1 });
  t.same(capped.context, plain.context);
  t.ok(
    (capped.draft_count ?? 0) > 0 && (capped.draft_count ?? 0) <= capped.eval_count,
    `at most one per generated token (${capped.draft_count} for ${capped.eval_count})`,
  );
  t.ok((capped.draft_count ?? 0) < (spec.draft_count ?? 0), "fewer than uncapped");

  const show = (await (await postJson(`${url}/api/show`, { model: "target-file" })).json()) as { modelfile: string; parameters: string };
  t.match(show.modelfile, new RegExp(`\\nDRAFT \\S+${digest.replace(":", "-")}\\n`), "shown as Ollama shows it: DRAFT and the layer's blob");
  t.notMatch(show.parameters, /draft /, "not a parameter");
  // A draft named later replaces the file; a file and a name at once, and quantizing, are refused.
  t.equal((await postJson(`${url}/api/create`, { model: "target-named", from: "target-file", draft: "target", stream: false })).status, 200);
  t.notMatch(((await (await postJson(`${url}/api/show`, { model: "target-named" })).json()) as { modelfile: string }).modelfile, digest.replace(":", "-"));
  await assertError(
    t,
    await postJson(`${url}/api/create`, { model: "x", from: "target", draft: "target", draft_files: { "draft.gguf": digest } }),
    400,
    "give the draft model either by name ('draft') or as a file ('draft_files'), not both",
  );
  await assertError(
    t,
    await postJson(`${url}/api/create`, { model: "x", from: "target", quantize: "q4_K_M" }),
    400,
    "quantize 'q4_K_M' is not supported: lmd does not quantize models; quantize the GGUF with llama.cpp's llama-quantize and create from it",
  );
  await assertError(
    t,
    await postJson(`${url}/api/create`, { model: "x", from: "target", draft_files: { "draft.gguf": digest }, draft_quantize: "q8_0" }),
    400,
    "draft_quantize 'q8_0' is not supported: lmd does not quantize models; quantize the GGUF with llama.cpp's llama-quantize and create from it",
  );
  // Two draft files, and a projector (a CLIP GGUF) given as the draft: refused, nothing written.
  const clip = buildGguf({ kvs: [kv.str("general.architecture", "clip"), kv.str("general.name", "mmproj"), kv.u32("general.alignment", 32)] });
  const clipDigest = `sha256:${createHash("sha256").update(clip).digest("hex")}`;
  t.equal((await fetch(`${url}/api/blobs/${clipDigest}`, { method: "POST", body: clip })).status, 201);
  await assertError(
    t,
    await postJson(`${url}/api/create`, { model: "x", from: "target", draft_files: { "a.gguf": digest, "b.gguf": digest }, stream: false }),
    400,
    "more than one draft file given",
  );
  await assertError(
    t,
    await postJson(`${url}/api/create`, { model: "x", from: "target", draft_files: { "mmproj.gguf": clipDigest }, stream: false }),
    400,
    "invalid draft 'mmproj.gguf': a projector, not a model",
  );
  t.equal((await postJson(`${url}/api/show`, { model: "x" })).status, 404, "no model was written");
});
