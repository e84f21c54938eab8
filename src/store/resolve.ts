/**
 * Resolving a model name to what a runner and the routes need: the manifest, the paths of the
 * model, adapter and draft blobs (each checked to lie inside the store), and the small layers
 * (params, template, system, messages, config).
 *
 * The manifest comes through the store's {@link ManifestCache}. While the name is looked up, the
 * blobs of the manifest it had last are checked too, and their paths used when the manifest is
 * still the same text: an unchanged model resolves in one round of file-system requests.
 */
import { BrokenModelError, ModelNotFoundError } from "../errors.js";
import { layerKind, LayerTooLargeError, readSmallBlob } from "./layers.js";
import { MEDIA, type Layer, type Manifest } from "./manifest.js";
import { settle, unwrap, type ManifestCache } from "./manifest-cache.js";
import { displayName, nameKey, parseModelName, printable, type ModelName } from "./names.js";

/** A name resolved to what a runner and the routes need. */
export interface ResolvedModel {
  name: ModelName;
  /** `model:tag` as users write it. */
  display: string;
  /** Lower-cased full name: the scheduler's key. */
  key: string;
  manifest: Manifest;
  /** Digest of the GGUF layer (`sha256:<hex>`). */
  digest: string;
  modelPath: string;
  /** Paths of the LoRA adapter layers, in manifest order: the runner applies them at load. */
  adapterPaths: string[];
  /** Path of the draft model layer (Ollama's `DRAFT <file>`), if any. */
  draftLayerPath: string | undefined;
  size: number;
  /** Options from the params layer (Modelfile PARAMETER lines). */
  params: Record<string, unknown>;
  template: string | undefined;
  system: string | undefined;
  /** The config blob's `model_family` and `parser` ("" when absent): Ollama's harmony rule reads them (template/harmony.ts). */
  family: string;
  parser: string;
  /** The config blob's `renderer` (Ollama's built-in prompt renderers; see {@link goTemplateOf}). */
  renderer: string;
  /** The MESSAGE lines (messages layer): a conversation put in front of every chat, as Ollama does. */
  messages: ModelMessage[];
  modifiedAt: Date;
}

/** What lmd reads of a model's config blob. */
export interface ModelConfig {
  family: string;
  parser: string;
  renderer: string;
}

export interface ModelMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** What the resolver needs of the store (declared here so that store.ts imports this file, not the reverse). */
export interface ResolveSource {
  readonly manifests: ManifestCache;
  /** A blob's real path, refused when it leads out of the store. */
  blobFile(digest: string): Promise<string>;
  config(manifest: Manifest): Promise<ModelConfig>;
}

/**
 * The Go template lmd renders a model's prompts with: its template layer, unless its config names
 * one of Ollama's built-in renderers (`RENDERER qwen3-coder`, `qwen3.5`, …: Go code in Ollama, none
 * of which lmd has). Such a model's template layer is a stub (`{{ .Prompt }}`), so it is rendered
 * by its GGUF's own chat template instead, as a model without a template layer is.
 */
export function goTemplateOf(model: { template: string | undefined; renderer: string }): string | undefined {
  return model.renderer ? undefined : model.template;
}

/** Resolves a model name; throws for an invalid name and {@link ModelNotFoundError} when it is not in the store. */
export async function resolveModel(store: ResolveSource, input: string): Promise<ResolvedModel> {
  const name = parseModelName(input);
  const shown = printable(input);
  // The blobs of the manifest this name had last are checked while the name is looked up.
  const previous = store.manifests.previous(name);
  const previousModel = previous && modelLayerOf(previous.manifest);
  const ahead = previousModel && settle(blobPaths(store, previous.manifest, previousModel));
  const found = await store.manifests.lookup(name);
  const modelLayer = found && modelLayerOf(found.manifest);
  if (!found || !modelLayer) throw new ModelNotFoundError(shown);
  const { manifest } = found;
  const paths = await unwrap(ahead && previous.text === found.text ? ahead : settle(blobPaths(store, manifest, modelLayer)));
  const small = (mediaType: string) => smallLayer(store, manifest, mediaType);
  const [params, template, system, messages, config] = await Promise.all([
    small(MEDIA.params).then((text) => (text === undefined ? {} : (JSON.parse(text) as Record<string, unknown>))),
    small(MEDIA.template),
    small(MEDIA.system),
    small(MEDIA.messages),
    store.config(manifest),
  ]).catch((err: unknown) => {
    if (err instanceof LayerTooLargeError) throw new BrokenModelError(shown, err.message, err);
    throw err;
  });
  return {
    name,
    display: displayName(name),
    key: nameKey(name),
    manifest,
    digest: modelLayer.digest,
    modelPath: paths.model,
    adapterPaths: paths.adapters,
    draftLayerPath: paths.draft,
    size: manifest.layers.reduce((n, l) => n + l.size, 0),
    params,
    template,
    system,
    family: config.family,
    parser: config.parser,
    renderer: config.renderer,
    messages: messages === undefined ? [] : parseMessages(messages, shown),
    modifiedAt: found.stat.mtime,
  };
}

function modelLayerOf(manifest: Manifest): Layer | undefined {
  return manifest.layers.find((l) => l.mediaType === MEDIA.model);
}

/** The real paths of a manifest's model, draft and adapter blobs, all asked at once. */
async function blobPaths(store: ResolveSource, manifest: Manifest, model: Layer): Promise<{ model: string; draft: string | undefined; adapters: string[] }> {
  const draft = manifest.layers.find((l) => l.mediaType === MEDIA.draft);
  const adapters = manifest.layers.filter((l) => l.mediaType === MEDIA.adapter);
  const [modelPath, draftPath, adapterPaths] = await Promise.all([
    store.blobFile(model.digest),
    draft && store.blobFile(draft.digest),
    Promise.all(adapters.map((l) => store.blobFile(l.digest))),
  ]);
  return { model: modelPath, draft: draftPath, adapters: adapterPaths };
}

/** A small layer's text (capped and cached by layers.ts), or undefined when the manifest has none. */
async function smallLayer(store: ResolveSource, manifest: Manifest, mediaType: string): Promise<string | undefined> {
  const layer = manifest.layers.find((l) => l.mediaType === mediaType);
  if (!layer) return undefined;
  return readSmallBlob(() => store.blobFile(layer.digest), layer.digest, layerKind(mediaType));
}

/** A messages layer: a JSON array of `{role, content}` (what `/api/create` and MESSAGE lines store). */
function parseMessages(text: string, model: string): ModelMessage[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const valid = (m: unknown): m is ModelMessage => {
    const { role, content } = (typeof m === "object" && m !== null ? m : {}) as Partial<ModelMessage>;
    return role !== undefined && ["system", "user", "assistant"].includes(role) && typeof content === "string";
  };
  if (!Array.isArray(value) || !value.every(valid)) throw new BrokenModelError(model, "invalid messages layer");
  return value.map((m) => ({ role: m.role, content: m.content }));
}
