/**
 * Wire shapes of the endpoints the CLI calls that src/api/types.ts does not declare yet
 * (Ollama's documented shapes). Only the fields the CLI reads are listed.
 */
import type { FinalStats, Format, ModelOptions } from "../api/types.js";

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  thinking?: string;
}

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  stream?: boolean;
  format?: Format;
  keep_alive?: string | number;
  options?: ModelOptions;
}

export interface ChatChunk extends Partial<FinalStats> {
  model: string;
  message?: ChatMessage;
  done: boolean;
  done_reason?: string;
}

export interface ModelDetails {
  format?: string;
  family?: string;
  parameter_size?: string;
  quantization_level?: string;
}

export interface TagsResponse {
  models: { name: string; model?: string; modified_at?: string; size?: number; digest?: string; details?: ModelDetails }[];
}

export interface PsResponse {
  models: { name: string; model?: string; size?: number; size_vram?: number; digest?: string; expires_at?: string; context_length?: number }[];
}

export interface ShowResponse {
  modelfile?: string;
  parameters?: string;
  template?: string;
  system?: string;
  license?: string;
  details?: ModelDetails;
  model_info?: Record<string, unknown>;
  capabilities?: string[];
  messages?: ChatMessage[];
}

/** A progress line of pull, push and create. */
export interface ProgressLine {
  status: string;
  digest?: string;
  total?: number;
  completed?: number;
}
