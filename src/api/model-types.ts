/**
 * Wire types of the model-management endpoints (Ollama's shapes): tags, show, pull, push,
 * create, copy, delete. A leaf like types.ts: the server, the CLI and the tests share it.
 * `name` is accepted wherever Ollama's clients send it instead of `model`.
 */

/** `details` of a model in `/api/tags` and `/api/show`. */
export interface ModelDetails {
  parent_model: string;
  format: string;
  family: string;
  families: string[] | null;
  parameter_size: string;
  quantization_level: string;
}

/** One entry of `GET /api/tags`. */
export interface ModelListEntry {
  name: string;
  model: string;
  modified_at: string;
  size: number;
  /** sha256 hex of the manifest. */
  digest: string;
  details: ModelDetails;
  /** What the model can do (Ollama's names), as in /api/show. */
  capabilities?: Capability[];
}

export interface TagsResponse {
  models: ModelListEntry[];
}

export interface ShowRequest {
  model?: string;
  name?: string;
  verbose?: boolean;
  system?: string;
  template?: string;
}

export type Capability = "completion" | "tools" | "insert" | "embedding" | "vision" | "reranking" | "thinking";

export interface ShowResponse {
  modelfile: string;
  parameters: string;
  template: string;
  /** Ollama's built-in renderer and parser the model's config names (omitted when none). */
  renderer?: string;
  parser?: string;
  system?: string;
  license?: string;
  /** The model's MESSAGE lines, in front of every chat (omitted when there are none, as Ollama). */
  messages?: CreateMessage[];
  details: ModelDetails;
  model_info: Record<string, unknown>;
  capabilities: Capability[];
  modified_at: string;
}

export interface PullRequest {
  model?: string;
  name?: string;
  insecure?: boolean;
  stream?: boolean;
}

export interface PushRequest {
  model?: string;
  name?: string;
  insecure?: boolean;
  stream?: boolean;
}

/** A line of pull/push/create progress (NDJSON), and the one object of `stream:false`. */
export interface ProgressResponse {
  status: string;
  digest?: string;
  total?: number;
  completed?: number;
}

export interface CreateMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

export interface CreateRequest {
  model?: string;
  name?: string;
  /** An existing model's name, or a blob digest `sha256:<hex>` already uploaded. */
  from?: string;
  /** File name → digest of a blob already uploaded with `POST /api/blobs/:digest`. */
  files?: Record<string, string>;
  /** LoRA adapters: file name → digest. */
  adapters?: Record<string, string>;
  template?: string;
  system?: string;
  parameters?: Record<string, unknown>;
  /** lmd: a draft model (by name) for speculative decoding; stored as the parameter `draft`. */
  draft?: string;
  /** Ollama's: the draft model's GGUF (file name → digest of an uploaded blob), stored as a draft layer. */
  draft_files?: Record<string, string>;
  /** Ollama's quantization on create, which lmd does not do (a 400). */
  quantize?: string;
  draft_quantize?: string;
  /** Ollama's built-in renderer and parser, kept in the config (see docs/models.md: lmd renders such a model with its GGUF's chat template). */
  renderer?: string;
  parser?: string;
  messages?: CreateMessage[];
  license?: string | string[];
  stream?: boolean;
}

export interface CopyRequest {
  source: string;
  destination: string;
}

export interface DeleteRequest {
  model?: string;
  name?: string;
}

/** One entry of `GET /api/ps`. */
export interface RunningModel {
  name: string;
  model: string;
  size: number;
  digest: string;
  details: ModelDetails;
  expires_at: string;
  size_vram: number;
  context_length: number;
  /** lmd: parallel slots of this load, requests waiting for one, and the policy file's entry (if any). */
  num_parallel: number;
  queued: number;
  /** lmd: the KV cache's element type and the flash-attention setting of this load. */
  kv_cache_type: "f16" | "q8_0" | "q4_0";
  flash_attention: "auto" | boolean;
  policy?: ModelPolicyView;
}

/** A model's entry in SERVICE_MODELS_CONFIG, as `/api/ps` shows it. */
export interface ModelPolicyView {
  num_parallel?: number;
  num_ctx?: number;
  /** Nanoseconds as Ollama writes durations; negative = forever. */
  keep_alive?: number;
  pinned: boolean;
  preload: boolean;
  options: Record<string, unknown>;
  kv_cache_type?: "f16" | "q8_0" | "q4_0";
  flash_attention?: "auto" | boolean;
  gpus?: number[];
}

export interface PsResponse {
  models: RunningModel[];
}
