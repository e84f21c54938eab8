/**
 * Wire types of the HTTP API (Ollama's shapes). A leaf: shared by the server, the CLI, the
 * gateway and the tests, and importing nothing from the server.
 */

/** Model options (Ollama's `options` object); their ranges are in schemas.ts. */
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
  /** lmd: speculative decoding by prompt lookup for this load; `speculative: false` turns any speculation off for one request. */
  prompt_lookup?: boolean;
  speculative?: boolean;
  /** lmd: draft tokens below this probability end a draft (llama-server's --draft-p-min; default 0.6). */
  draft_p_min?: number;
  draft_num_predict?: number;
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
  /** Thinking models: show thoughts apart (true, or a level) or suppress them (false). */
  think?: boolean | "high" | "medium" | "low" | "max";
  /** lmd: a prompt over the context drops its front (true, SERVICE_TRUNCATE's default) or is a 400 (false). */
  truncate?: boolean;
  /** Ollama's debug option: answer the rendered prompt instead of running the model. */
  _debug_render_only?: boolean;
  /** Report each generated token's log probability (Ollama's fields). */
  logprobs?: boolean;
  /** With `logprobs`: the most likely alternatives per token, 0–20. */
  top_logprobs?: number;
}

/** The answer to `_debug_render_only` (Ollama's DebugInfo). */
export interface DebugRenderAnswer {
  model: string;
  created_at: string;
  _debug_info: { rendered_template: string; image_count?: number };
}

/** A token's log probability as Ollama reports it (`bytes`: its UTF-8 bytes). */
export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}

/** A generated token's log probability, with the alternatives when `top_logprobs` was asked for. */
export interface Logprob extends TokenLogprob {
  top_logprobs?: TokenLogprob[];
}

/** Timing and count fields of a final response (durations in nanoseconds). */
export interface FinalStats {
  total_duration: number;
  load_duration: number;
  prompt_eval_count: number;
  prompt_eval_duration: number;
  eval_count: number;
  eval_duration: number;
  /** lmd, with speculative decoding: draft tokens the model checked, and those it accepted. */
  draft_count?: number;
  draft_accepted_count?: number;
  /** lmd: prompt tokens dropped to fit the context (0 when none), always present. */
  truncated_tokens: number;
}

export interface GenerateChunk {
  model: string;
  created_at: string;
  response: string;
  thinking?: string;
  done: false;
  logprobs?: Logprob[];
}

export type DoneReason = "stop" | "length" | "load" | "unload";

/** A tool call as Ollama writes it: the arguments are an object, not a JSON string; /api/chat gives each an `id`. */
export interface ChatToolCall {
  id?: string;
  function: { index?: number; name: string; arguments: Record<string, unknown> };
}

export interface GenerateFinal extends Partial<FinalStats> {
  model: string;
  created_at: string;
  response: string;
  done: true;
  done_reason: DoneReason;
  context?: number[];
  thinking?: string;
  /** A harmony model's tool call (Ollama's GenerateResponse `tool_calls`). */
  tool_calls?: ChatToolCall[];
  logprobs?: Logprob[];
}

export interface VersionResponse {
  version: string;
}

export interface ErrorResponse {
  error: string;
}
