/**
 * Wire types of the HTTP API (Ollama's shapes). A leaf: shared by the server, the CLI, the
 * gateway and the tests, and importing nothing from the server.
 */

/** Model options (Ollama's `options` object); ranges in CONTRACT §3. */
export interface ModelOptions {
  num_keep?: number;
  seed?: number;
  num_predict?: number;
  top_k?: number;
  top_p?: number;
  min_p?: number;
  typical_p?: number;
  repeat_last_n?: number;
  temperature?: number;
  repeat_penalty?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  penalize_newline?: boolean;
  stop?: string | string[];
  num_ctx?: number;
  num_batch?: number;
  num_gpu?: number;
  main_gpu?: number;
  use_mmap?: boolean;
  num_thread?: number;
  [other: string]: unknown;
}

export type Format = "" | "json" | Record<string, unknown>;

export interface GenerateRequest {
  model: string;
  prompt: string;
  suffix?: string;
  system?: string;
  template?: string;
  context?: number[];
  stream?: boolean;
  raw?: boolean;
  format?: Format;
  keep_alive?: string | number;
  options?: ModelOptions;
  images?: string[];
}

/** Timing and count fields of a final response (durations in nanoseconds). */
export interface FinalStats {
  total_duration: number;
  load_duration: number;
  prompt_eval_count: number;
  prompt_eval_duration: number;
  eval_count: number;
  eval_duration: number;
}

export interface GenerateChunk {
  model: string;
  created_at: string;
  response: string;
  done: false;
}

export type DoneReason = "stop" | "length" | "load" | "unload";

export interface GenerateFinal extends Partial<FinalStats> {
  model: string;
  created_at: string;
  response: string;
  done: true;
  done_reason: DoneReason;
  context?: number[];
}

export interface VersionResponse {
  version: string;
}

export interface ErrorResponse {
  error: string;
}
