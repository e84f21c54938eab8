/**
 * `POST /api/create` (CONTRACT §4): a new model from an existing one (`from: "<name>"`), or from
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
import { GgufError, validateGguf, type GgufMetadata } from "../models/gguf.js";
import { fileTypeName, humanNumber } from "../models/model-info.js";
import { parseModelName, printable } from "../models/names.js";
import { commitManifest } from "../models/store-admin.js";
import { digestHex, MEDIA, type Layer, type ModelStore } from "../models/store.js";
import { modelField, Progress, requireIdle } from "./model-common.js";
import type { Services } from "./services.js";

const validate = compileValidator<CreateRequest>(createSchema);

/** Layer types a request field replaces wholesale when it is given. */
const REPLACED_BY: Partial<Record<keyof CreateRequest, string>> = {
  template: MEDIA.template,
  system: MEDIA.system,
  parameters: MEDIA.params, // merged with the base model's parameters
  messages: MEDIA.messages,
  license: MEDIA.license,
  adapters: MEDIA.adapter,
};

export function createRoutes(router: Router, services: Services): void {
  router.add("POST", "/api/create", (ctx) => create(ctx, services));
}

async function create(ctx: RequestContext, { store, scheduler }: Services): Promise<void> {
  const body = validate(await readJson(ctx.req, ctx.maxBodyBytes));
  const input = modelField(body);
  parseModelName(input); // 400 for an invalid name before any work
  if (!body.from && !body.files) throw new BadRequestError("neither 'from' nor 'files' was specified");
  checkParameters(body.parameters);

  let layers: Layer[] = [];
  let baseParams: Record<string, unknown> = {};
  let gguf: GgufMetadata | undefined;
  if (body.from && !body.from.startsWith("sha256:")) {
    const base = await store.findModel(body.from);
    if (!base) throw new ModelNotFoundError(printable(body.from));
    layers = [...base.manifest.layers];
    const params = layers.find((l) => l.mediaType === MEDIA.params);
    if (params) baseParams = JSON.parse(await store.readBlobText(params.digest)) as Record<string, unknown>;
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
  for (const [file, digest] of Object.entries(body.adapters ?? {})) layers.push((await ggufLayer(store, file, digest, MEDIA.adapter)).layer);
  const modelLayer = layers.find((l) => l.mediaType === MEDIA.model);
  if (!modelLayer) throw new BadRequestError("no model file given: 'from' or 'files' must name a GGUF model");
  gguf ??= await readGguf(store, "model", modelLayer.digest);

  await requireIdle(scheduler, input); // 409 with its real status, before the stream starts
  const unpin = store.pin(layers.map((l) => l.digest));
  try {
    const progress = new Progress(ctx.res, body.stream !== false);
    for (const l of layers) await progress.send({ status: `using existing layer ${l.digest}` });
    const added = await smallLayers(store, body, baseParams);
    for (const l of added) await progress.send({ status: `creating new layer ${l.digest}` });
    layers.push(...added);
    const config = await store.addBlob(JSON.stringify(configBlob(gguf, layers)), MEDIA.config);
    await progress.send({ status: "writing manifest" });
    await commitManifest(store, input, { schemaVersion: 2, mediaType: MEDIA.manifest, config, layers });
    progress.done();
  } finally {
    unpin();
  }
}

/** New layers for the text fields of the request. */
async function smallLayers(store: ModelStore, body: CreateRequest, baseParams: Record<string, unknown>): Promise<Layer[]> {
  const out: Layer[] = [];
  if (body.template !== undefined) out.push(await store.addBlob(body.template, MEDIA.template));
  if (body.system !== undefined) out.push(await store.addBlob(body.system, MEDIA.system));
  if (body.parameters !== undefined) out.push(await store.addBlob(JSON.stringify({ ...baseParams, ...body.parameters }), MEDIA.params));
  if (body.messages !== undefined) out.push(await store.addBlob(JSON.stringify(body.messages), MEDIA.messages));
  const licenses = body.license === undefined ? [] : Array.isArray(body.license) ? body.license : [body.license];
  for (const l of licenses) out.push(await store.addBlob(l, MEDIA.license));
  return out;
}

/** A GGUF blob named by `files`/`adapters`/`from`: its digest valid, the blob present and readable as GGUF. */
async function ggufLayer(store: ModelStore, file: string, digest: string, mediaType: string): Promise<{ layer: Layer; meta: GgufMetadata }> {
  digestHex(digest);
  if (!file.startsWith("sha256:") && !file.toLowerCase().endsWith(".gguf")) throw new BadRequestError(`unsupported file '${printable(file)}': only GGUF files are supported`);
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

/** The config blob Ollama writes: format, family, parameter size, file type and the layer list. */
function configBlob(gguf: GgufMetadata, layers: Layer[]): Record<string, unknown> {
  const arch = typeof gguf.metadata["general.architecture"] === "string" ? gguf.metadata["general.architecture"] : "";
  return {
    model_format: "gguf",
    model_family: arch,
    model_families: arch ? [arch] : null,
    model_type: gguf.parameterCount !== undefined ? humanNumber(gguf.parameterCount) : "",
    file_type: fileTypeName(gguf),
    architecture: "amd64",
    os: "linux",
    rootfs: { type: "layers", diff_ids: layers.map((l) => l.digest) },
  };
}

/** `parameters` values must be scalars or arrays of scalars (they become Modelfile PARAMETER lines). */
function checkParameters(parameters: Record<string, unknown> | undefined): void {
  const scalar = (v: unknown) => ["string", "number", "boolean"].includes(typeof v);
  for (const [k, v] of Object.entries(parameters ?? {})) {
    if (!scalar(v) && !(Array.isArray(v) && v.every(scalar))) throw new BadRequestError(`invalid type for parameter 'parameters.${k}': expected string, number, boolean or array`);
  }
}
