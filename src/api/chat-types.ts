/**
 * Wire types of chat and embeddings: Ollama's `/api/chat`, `/api/embed`, `/api/embeddings`, and the
 * OpenAI-compatible `/v1` bodies lmd accepts and answers. A leaf, like types.ts.
 */
import type { ChatToolCall, FinalStats, Format, Logprob, ModelOptions } from "./types.js";

export type { ChatToolCall };

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content?: string;
  thinking?: string;
  images?: string[] | null;
  tool_calls?: ChatToolCall[];
  /** On `tool` messages: which tool produced this result. */
  tool_name?: string;
  /** On `tool` messages: the id of the call this answers (a template's `.ToolCallID`). */
  tool_call_id?: string;
}

/** A function the model may call; `parameters` is a JSON Schema of its arguments object. */
export interface ChatTool {
  type: "function";
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

export interface ChatRequest {
  model: string;
  /** Empty or absent: the load form (with `keep_alive: 0`, the unload form). */
  messages?: ChatMessage[];
  tools?: ChatTool[];
  format?: Format;
  options?: ModelOptions;
  stream?: boolean;
  keep_alive?: string | number;
  /** Thinking models: show thoughts apart (true) or suppress them (false). Levels count as true. */
  think?: boolean | "high" | "medium" | "low" | "max";
  /** lmd: a history over the context drops its oldest turns (true, SERVICE_TRUNCATE's default) or is a 400 (false). */
  truncate?: boolean;
  /** Ollama's debug option: answer the rendered prompt instead of running the model. */
  _debug_render_only?: boolean;
  /** Report each content token's log probability (Ollama's fields). */
  logprobs?: boolean;
  /** With `logprobs`: the most likely alternatives per token, 0–20. */
  top_logprobs?: number;
}

export interface ChatResponseMessage {
  role: "assistant";
  content: string;
  thinking?: string;
  tool_calls?: ChatToolCall[];
}

export interface ChatChunk {
  model: string;
  created_at: string;
  message: ChatResponseMessage;
  done: false;
  logprobs?: Logprob[];
}

export interface ChatFinal extends Partial<FinalStats> {
  model: string;
  created_at: string;
  message: ChatResponseMessage;
  done: true;
  done_reason: "stop" | "length" | "load" | "unload";
  logprobs?: Logprob[];
}

export interface EmbedRequest {
  model: string;
  input?: string | string[];
  /** Default true: cut inputs longer than the context; false: such an input is a 400. */
  truncate?: boolean;
  /** Keep the first N dimensions (then normalize). */
  dimensions?: number;
  keep_alive?: string | number;
  options?: ModelOptions;
}

export interface EmbedResponse {
  model: string;
  /** L2-normalized vectors, one per input. */
  embeddings: number[][];
  total_duration: number;
  load_duration: number;
  prompt_eval_count: number;
}

/** The older single-input form. */
export interface EmbeddingsRequest {
  model: string;
  prompt?: string;
  keep_alive?: string | number;
  options?: ModelOptions;
}

/** Its vector is not normalized (as Ollama's is not). */
export interface EmbeddingsResponse {
  embedding: number[];
}

// ---- OpenAI-compatible /v1 ----

export interface OpenAIToolCall {
  id: string;
  type: "function";
  /** `arguments` is a JSON string on /v1. */
  function: { name: string; arguments: string };
}

export interface OpenAIContentPart {
  type: string;
  text?: string;
}

export interface OpenAIMessage {
  role: "system" | "developer" | "user" | "assistant" | "tool";
  content?: string | OpenAIContentPart[] | null;
  name?: string | null;
  tool_calls?: OpenAIToolCall[];
  tool_call_id?: string | null;
  /** Assistant messages: the thoughts that came with the answer (Ollama's field). */
  reasoning?: string | null;
}

export type OpenAIToolChoice = "none" | "auto" | "required" | { type: "function"; function: { name: string } };

export interface OpenAISampling {
  model: string;
  stream?: boolean;
  stream_options?: { include_usage?: boolean } | null;
  max_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  seed?: number | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  stop?: string | string[] | null;
  n?: number | null;
}

export interface OpenAIChatRequest extends OpenAISampling {
  messages: OpenAIMessage[];
  max_completion_tokens?: number | null;
  logprobs?: boolean | null;
  top_logprobs?: number | null;
  tools?: ChatTool[];
  tool_choice?: OpenAIToolChoice | null;
  response_format?: { type: "text" | "json_object" | "json_schema"; json_schema?: { name?: string; schema?: Record<string, unknown>; strict?: boolean } };
  /** Thinking models: "none" turns thoughts off; "minimal".."high" (and beyond) set the level. */
  reasoning_effort?: string | null;
  reasoning?: { effort?: string | null } | null;
}

export interface OpenAICompletionRequest extends OpenAISampling {
  prompt: string | string[];
  suffix?: string | null;
  echo?: boolean | null;
  /** Log probabilities with this many alternatives per token (OpenAI allows 0–5; lmd 0–20). */
  logprobs?: number | null;
}

export interface OpenAIEmbeddingRequest {
  model: string;
  input: string | string[];
  encoding_format?: "float" | "base64";
  dimensions?: number;
}

export interface OpenAIUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** lmd: prompt tokens dropped to fit the context (0 when none). */
  truncated_tokens: number;
}

export interface OpenAIModel {
  id: string;
  object: "model";
  created: number;
  owned_by: string;
}
