/**
 * Installs a GGUF file that is already on this machine into the store under a name, with the
 * config blob and optional params/template/system layers Ollama's layout expects. Used for the
 * demo model and by tests; user uploads go through `/api/blobs` and `/api/create`.
 */
import { MEDIA, type Layer, type ModelStore } from "./store.js";

export interface InstallOptions {
  /** GGUF `general.architecture` and file type, for the config blob (the parent never parses GGUF with node-llama-cpp). */
  architecture?: string;
  fileType?: string;
  params?: Record<string, unknown>;
  template?: string;
  system?: string;
  /** Ollama's built-in renderer and parser, for the config blob. */
  renderer?: string;
  parser?: string;
}

export async function installGguf(store: ModelStore, name: string, ggufFile: string, options: InstallOptions = {}): Promise<void> {
  const model = await store.addBlobFromFile(ggufFile, MEDIA.model);
  const layers: Layer[] = [model];
  if (options.template !== undefined) layers.push(await store.addBlob(options.template, MEDIA.template));
  if (options.system !== undefined) layers.push(await store.addBlob(options.system, MEDIA.system));
  if (options.params !== undefined) layers.push(await store.addBlob(JSON.stringify(options.params), MEDIA.params));
  const architecture = options.architecture ?? "llama";
  const configJson = {
    model_format: "gguf",
    model_family: architecture,
    model_families: [architecture],
    model_type: "",
    file_type: options.fileType ?? "",
    ...(options.renderer ? { renderer: options.renderer } : {}),
    ...(options.parser ? { parser: options.parser } : {}),
    architecture: "amd64",
    os: "linux",
    rootfs: { type: "layers", diff_ids: layers.map((l) => l.digest) },
  };
  const config = await store.addBlob(JSON.stringify(configJson), MEDIA.config);
  await store.writeManifest(name, { schemaVersion: 2, mediaType: MEDIA.manifest, config, layers });
}
