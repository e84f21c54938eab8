/**
 * `POST /api/create`: a new model from an existing one (`from: "<name>"`), or from
 * GGUF blobs already uploaded with `POST /api/blobs/:digest` (`files: {name: digest}`, or
 * `from: "sha256:<hex>"`), with `template`, `system`, `parameters`, `messages`, `license` and
 * `adapters`. The daemon never reads a server-side path named by a request: every file is a
 * digest of a blob in the store.
 */
import fs from "node:fs/promises";
import type { CreateRequest } from "../api/model-types.js";
import { createSchema } from "../api/model-schemas.js";
import { BadRequestError, ModelNotFoundError, NotFoundError } from "../errors.js";
import { readJson } from "../http/body.js";
import type { RequestContext, Router } from "../http/router.js";
import { compileValidator } from "../http/validate.js";
import { GgufError, validateGguf, type GgufMetadata } from "../gguf/gguf.js";
import { loraMismatch } from "../gguf/lora-check.js";
import { fileTypeName, humanNumber } from "../store/model-info.js";
import { registryRef } from "../registry/reference.js";
import { parseModelName, printable } from "../store/names.js";
import { commitManifest, removeUnreferenced } from "../store/admin.js";
import { checkLayerSize } from "../store/layers.js";
import { withNames } from "../store/locks.js";
import { digestHex, isDigest, MEDIA, type Layer, type ModelStore } from "../store/store.js";
import { parseTemplate } from "../template/index.js";
import { modelField, Progress, requireIdle } from "./model-common.js";
import { pullModel } from "./pull.js";
import type { Services } from "../chat/services.js";

const validate = compileValidator<CreateRequest>(createSchema, { asGo: true });

/** Layer types a request field replaces wholesale when it is given. */
const REPLACED_BY: Partial<Record<keyof CreateRequest, string>> = {
  template: MEDIA.template,
  system: MEDIA.system,
  parameters: MEDIA.params, // merged with the base model's parameters
  messages: MEDIA.messages,
  license: MEDIA.license,
  adapters: MEDIA.adapter,
  draft_files: MEDIA.draft,
};

export function createRoutes(router: Router, services: Services): void {
  router.add("POST", "/api/create", (ctx) => create(ctx, services));
}

async function create(ctx: RequestContext, services: Services): Promise<void> {
  const { store, scheduler } = services;
  const body = validate(await readJson(ctx.req, ctx.maxBodyBytes));
  const input = modelField(body);
  parseModelName(input); // 400 for an invalid name before any work
  if (!body.from && !body.files) throw new BadRequestError("neither 'from' nor 'files' was specified");
  // Ollama quantizes F16/F32 models on create; lmd has no quantizer (llama.cpp's llama-quantize does it beforehand).
  for (const field of ["quantize", "draft_quantize"] as const) {
    if (body[field])
      throw new BadRequestError(
        `${field} '${printable(body[field])}' is not supported: lmd does not quantize models; quantize the GGUF with llama.cpp's llama-quantize and create from it`,
      );
  }
  checkParameters(body.parameters);
  if (body.draft_files && (body.draft !== undefined || body.parameters?.draft !== undefined))
    throw new BadRequestError("give the draft model either by name ('draft') or as a file ('draft_files'), not both");
  // lmd: a draft model for speculative decoding is kept as the parameter `draft`; it must exist.
  if (body.draft !== undefined) body.parameters = { ...body.parameters, draft: body.draft };
  const draft = body.parameters?.draft;
  if (draft !== undefined && (typeof draft !== "string" || !(await store.findModel(draft)))) throw new ModelNotFoundError(printable(String(draft)));
  // A messages layer holds each message's role and content; anything else a client sent with them
  // (however deeply nested) is not stored.
  if (body.messages) body.messages = body.messages.map(({ role, content }) => ({ role, content }));
  checkSmallFields(body);
  // A template that cannot be parsed is refused now (as Ollama does), not at every later generate.
  if (body.template !== undefined) parseTemplate(body.template);
  await store.requireWritable();
  const fromName = body.from && !body.from.startsWith("sha256:") ? body.from : undefined;
  // As Ollama: a base model that is not in the store is pulled first, its progress leading the create's.
  let progress: Progress | undefined;
  if (fromName && !(await store.findModel(fromName))) {
    progress = new Progress(ctx.res, body.stream !== false);
    await pullModel(services, fromName, registryRef(fromName), progress, ctx);
  }
  const names = fromName ? [input, fromName] : [input];
  // One create, copy, delete or pull commit per name at a time (store/locks.ts): the base model
  // cannot be deleted under us, and two writers of one name cannot interleave.
  // Blobs named by digest are pinned from the start: a concurrent delete of another model that
  // shares them must not collect them between our check and our manifest.
  const named = [...Object.values(body.files ?? {}), ...Object.values(body.adapters ?? {}), ...Object.values(body.draft_files ?? {}), body.from ?? ""].filter(
    isDigest,
  );
  const unpin = store.pin(named);
  try {
    await withNames(store, names, () => createLocked(ctx, body, input, { store, scheduler }, progress));
  } finally {
    unpin();
  }
}

async function createLocked(
  ctx: RequestContext,
  body: CreateRequest,
  input: string,
  { store, scheduler }: Pick<Services, "store" | "scheduler">,
  pulled: Progress | undefined, // the progress of the base model's pull, which the create's lines follow
): Promise<void> {
  let layers: Layer[] = [];
  let baseParams: Record<string, unknown> = {};
  let gguf: GgufMetadata | undefined;
  let { renderer = "", parser = "" } = body;
  if (body.from && !body.from.startsWith("sha256:")) {
    const base = await store.findModel(body.from);
    if (!base) throw new ModelNotFoundError(printable(body.from));
    layers = [...base.manifest.layers];
    const params = layers.find((l) => l.mediaType === MEDIA.params);
    if (params) baseParams = JSON.parse(await store.readBlobText(params.digest)) as Record<string, unknown>;
    // One draft at a time: a draft file replaces a draft named by the base's parameters, and a draft named replaces the base's file.
    if (body.draft_files && baseParams.draft !== undefined) {
      const { draft: _, ...rest } = baseParams;
      baseParams = rest;
      body.parameters ??= {};
    }
    if (body.parameters?.draft !== undefined) layers = layers.filter((l) => l.mediaType !== MEDIA.draft);
    // The base's renderer and parser carry over unless the request names its own (as Ollama's config does).
    const config = await store.config(base.manifest);
    renderer = body.renderer ?? config.renderer;
    parser = body.parser ?? config.parser;
  }
  const ggufFiles: Array<[string, string]> = Object.entries(body.files ?? {});
  if (body.from?.startsWith("sha256:")) ggufFiles.unshift([body.from, body.from]);
  if (ggufFiles.length > 0) {
    layers = layers.filter((l) => l.mediaType !== MEDIA.model && l.mediaType !== MEDIA.projector);
    for (const [file, digest] of ggufFiles) {
      const { layer, meta } = await ggufLayer(store, file, digest, MEDIA.model);
      if (meta.metadata["general.architecture"] === "clip") layer.mediaType = MEDIA.projector;
      else if (layers.some((l) => l.mediaType === MEDIA.model)) throw new BadRequestError("more than one model file given");
      else gguf = meta;
      layers.push(layer);
    }
  }
  for (const [field, mediaType] of Object.entries(REPLACED_BY) as Array<[keyof CreateRequest, string]>) {
    if (body[field] !== undefined) layers = layers.filter((l) => l.mediaType !== mediaType);
  }
  const drafts = Object.entries(body.draft_files ?? {});
  if (drafts.length > 1) throw new BadRequestError("more than one draft file given");
  for (const [file, digest] of drafts) {
    const { layer, meta } = await ggufLayer(store, file, digest, MEDIA.draft);
    if (meta.metadata["general.architecture"] === "clip") throw new BadRequestError(`invalid draft '${printable(file)}': a projector, not a model`);
    layers.push(layer);
  }
  const adapters = new Map<string, string>(); // digest → the name the client gave it, for messages
  for (const [file, digest] of Object.entries(body.adapters ?? {})) {
    layers.push((await ggufLayer(store, file, digest, MEDIA.adapter)).layer);
    adapters.set(digest, file);
  }
  const modelLayer = layers.find((l) => l.mediaType === MEDIA.model);
  if (!modelLayer) throw new BadRequestError("no model file given: 'from' or 'files' must name a GGUF model");
  gguf ??= await readGguf(store, "model", modelLayer.digest);
  await checkAdapters(store, layers, gguf, adapters);
  checkRendering(gguf, renderer, parser);

  await requireIdle(scheduler, input); // 409 with its real status, before the stream starts
  const unpin = store.pin(layers.map((l) => l.digest));
  const written: string[] = [];
  try {
    const progress = pulled ?? new Progress(ctx.res, body.stream !== false);
    for (const l of layers) await progress.send({ status: `using existing layer ${l.digest}` });
    const added = await smallLayers(store, body, baseParams);
    written.push(...added.map((l) => l.digest));
    for (const l of added) await progress.send({ status: `creating new layer ${l.digest}` });
    layers.push(...added);
    const config = await store.addBlob(JSON.stringify(configBlob(gguf, layers, renderer, parser)), MEDIA.config);
    written.push(config.digest);
    await progress.send({ status: "writing manifest" });
    await commitManifest(store, input, { schemaVersion: 2, mediaType: MEDIA.manifest, config, layers });
    written.length = 0;
    progress.done();
  } finally {
    unpin();
    // A create that failed after writing layers (the client gone, a full disk): nothing references them.
    if (written.length > 0) await removeUnreferenced(store, written).catch(() => undefined);
  }
}

/** New layers for the text fields of the request. */
async function smallLayers(store: ModelStore, body: CreateRequest, baseParams: Record<string, unknown>): Promise<Layer[]> {
  const wanted: Array<[string, string]> = [];
  if (body.template !== undefined) wanted.push([body.template, MEDIA.template]);
  if (body.system !== undefined) wanted.push([body.system, MEDIA.system]);
  if (body.parameters !== undefined) wanted.push([JSON.stringify({ ...baseParams, ...body.parameters }), MEDIA.params]);
  if (body.messages !== undefined) wanted.push([JSON.stringify(body.messages), MEDIA.messages]);
  const licenses = body.license === undefined ? [] : Array.isArray(body.license) ? body.license : [body.license];
  for (const l of licenses) wanted.push([l, MEDIA.license]);
  return Promise.all(wanted.map(([text, mediaType]) => store.addBlob(text, mediaType)));
}

/** Small layers are capped (store/layers.ts): 400 before anything is written. */
function checkSmallFields(body: CreateRequest): void {
  const fields: Array<[string, unknown]> = [
    [MEDIA.template, body.template],
    [MEDIA.system, body.system],
    [MEDIA.params, body.parameters],
    [MEDIA.messages, body.messages],
  ];
  for (const l of body.license === undefined ? [] : Array.isArray(body.license) ? body.license : [body.license]) fields.push([MEDIA.license, l]);
  for (const [mediaType, value] of fields) {
    if (value === undefined) continue;
    const size = Buffer.byteLength(typeof value === "string" ? value : JSON.stringify(value));
    const tooLarge = checkLayerSize({ mediaType, size });
    if (tooLarge) throw new BadRequestError(tooLarge);
  }
}

/** A GGUF blob named by `files`/`adapters`/`from`: its digest valid, the blob present and readable as GGUF. */
async function ggufLayer(store: ModelStore, file: string, digest: string, mediaType: string): Promise<{ layer: Layer; meta: GgufMetadata }> {
  digestHex(digest);
  if (!file.startsWith("sha256:") && !file.toLowerCase().endsWith(".gguf"))
    throw new BadRequestError(`unsupported file '${printable(file)}': only GGUF files are supported`);
  const meta = await readGguf(store, file, digest);
  const { size } = await fs.stat(store.blobPath(digest));
  return { layer: { mediaType, digest, size }, meta };
}

async function readGguf(store: ModelStore, file: string, digest: string): Promise<GgufMetadata> {
  if (!(await store.hasBlob(digest))) throw new NotFoundError(`blob '${digest}' not found`);
  try {
    // The whole structure (counts, tensor types, offsets inside the file), not just the header.
    return await validateGguf(await store.insideStore(store.blobPath(digest)));
  } catch (err) {
    if (err instanceof GgufError) throw new BadRequestError(`invalid GGUF file '${printable(file)}': ${err.message}`);
    throw err;
  }
}

/**
 * Every adapter layer (new, or kept from `from`) must apply to the model layer: an adapter the
 * runner could not load is refused now, never stored and ignored (llama.cpp's own checks).
 */
async function checkAdapters(store: ModelStore, layers: Layer[], base: GgufMetadata, names: Map<string, string>): Promise<void> {
  for (const layer of layers.filter((l) => l.mediaType === MEDIA.adapter)) {
    const file = names.get(layer.digest) ?? layer.digest;
    const reason = loraMismatch(await readGguf(store, file, layer.digest), base);
    if (reason) throw new BadRequestError(`invalid adapter '${printable(file)}': ${reason}`);
  }
}

/**
 * Ollama's RENDERER and PARSER name Go code of Ollama's; lmd has its harmony parser and no
 * renderer. A model that names a renderer is rendered, and its output parsed, by its GGUF's chat
 * template (store.goTemplateOf), so it must have one; a parser other than harmony only comes with a
 * renderer (otherwise it would be stored and never used).
 */
function checkRendering(gguf: GgufMetadata, renderer: string, parser: string): void {
  if (renderer && typeof gguf.metadata["tokenizer.chat_template"] !== "string") {
    throw new BadRequestError(
      `renderer '${printable(renderer)}' is not built into lmd: such a model is rendered with its GGUF's chat template, and this GGUF has none`,
    );
  }
  if (parser && parser !== "harmony" && !renderer)
    throw new BadRequestError(
      `parser '${printable(parser)}' is not built into lmd (only 'harmony' is); with a RENDERER the GGUF's chat template parses the output`,
    );
}

/** The config blob Ollama writes: format, family, parameter size, file type, renderer and parser, and the layer list. */
function configBlob(gguf: GgufMetadata, layers: Layer[], renderer: string, parser: string): Record<string, unknown> {
  const arch = typeof gguf.metadata["general.architecture"] === "string" ? gguf.metadata["general.architecture"] : "";
  return {
    model_format: "gguf",
    model_family: arch,
    model_families: arch ? [arch] : null,
    model_type: gguf.parameterCount !== undefined ? humanNumber(gguf.parameterCount) : "",
    file_type: fileTypeName(gguf),
    ...(renderer ? { renderer } : {}),
    ...(parser ? { parser } : {}),
    architecture: "amd64",
    os: "linux",
    rootfs: { type: "layers", diff_ids: layers.map((l) => l.digest) },
  };
}

/** `parameters` values must be scalars or arrays of scalars (they become Modelfile PARAMETER lines). */
function checkParameters(parameters: Record<string, unknown> | undefined): void {
  const scalar = (v: unknown) => ["string", "number", "boolean"].includes(typeof v);
  for (const [k, v] of Object.entries(parameters ?? {})) {
    if (!scalar(v) && !(Array.isArray(v) && v.every(scalar)))
      throw new BadRequestError(`invalid type for parameter 'parameters.${k}': expected string, number, boolean or array`);
  }
}
