/** One blob moving between the model store and a registry: what a download or an upload works with. */
import type { Layer, ModelStore } from "../store/store.js";
import type { RegistryClient } from "./client.js";
import type { RegistryRef } from "./reference.js";

export interface BlobTransfer {
  client: RegistryClient;
  store: ModelStore;
  ref: RegistryRef;
  layer: Layer;
  /** Bytes done so far (a resumed download counts what it had). */
  onProgress: (completed: number) => void;
  signal: AbortSignal;
}
