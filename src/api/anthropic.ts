/**
 * Wire types and JSON Schemas of Anthropic's Messages API as lmd accepts it (`POST /v1/messages`,
 * `POST /v1/messages/count_tokens`). A leaf, like types.ts. Unknown fields are allowed and ignored
 * (`metadata`, `service_tier`, cache controls); ranges are those of the other endpoints.
 */

export interface AnthropicTextBlock {
  type: "text";
  text: string;
}

export interface AnthropicToolUseBlock {
  type: "tool_use";
  id: string;
  name: string;
  input: Record<string, unknown>;
}

export interface AnthropicToolResultBlock {
  type: "tool_result";
  tool_use_id: string;
  content?: string | { type: string; text?: string }[];
  is_error?: boolean;
}

export interface AnthropicThinkingBlock {
  type: "thinking";
  thinking: string;
  signature?: string;
}

/** A block of a request message; other types (`image`, `document`) are refused by the adapter. */
export type AnthropicBlock = AnthropicTextBlock | AnthropicToolUseBlock | AnthropicToolResultBlock | AnthropicThinkingBlock | { type: string };

export interface AnthropicMessage {
  role: "user" | "assistant";
  content: string | AnthropicBlock[];
}

export interface AnthropicTool {
  name: string;
  description?: string;
  input_schema?: Record<string, unknown>;
}

export type AnthropicToolChoice = { type: "auto" | "any" | "none" } | { type: "tool"; name: string };

export interface AnthropicCountRequest {
  model: string;
  messages: AnthropicMessage[];
  system?: string | AnthropicTextBlock[];
  tools?: AnthropicTool[];
  tool_choice?: AnthropicToolChoice;
  thinking?: { type: "enabled" | "disabled"; budget_tokens?: number };
}

/** Structured output: the answer's text is JSON that matches `schema` (what the SDKs' `messages.parse` sends). */
export interface AnthropicOutputFormat {
  type: "json_schema";
  schema: Record<string, unknown>;
}

export interface AnthropicRequest extends AnthropicCountRequest {
  max_tokens: number;
  output_config?: { format?: AnthropicOutputFormat | null; effort?: string | null };
  /** The beta name of `output_config.format`, which the SDKs' beta `parse` still sends. */
  output_format?: AnthropicOutputFormat | null;
  stream?: boolean;
  stop_sequences?: string[];
  temperature?: number;
  top_p?: number;
  top_k?: number;
}

/** A block of an answer. */
export type AnthropicOutputBlock = AnthropicTextBlock | AnthropicToolUseBlock | AnthropicThinkingBlock;

export type AnthropicStopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use";

export interface AnthropicResponse {
  id: string;
  type: "message";
  role: "assistant";
  model: string;
  content: AnthropicOutputBlock[];
  stop_reason: AnthropicStopReason | null;
  stop_sequence: string | null;
  usage: { input_tokens: number; output_tokens: number; truncated_tokens?: number };
}

const str = { type: "string" } as const;

const block = {
  type: "object",
  required: ["type"],
  properties: {
    type: str,
    text: str,
    id: str,
    name: str,
    input: { type: "object" },
    tool_use_id: str,
    content: { type: ["string", "array"], items: { type: "object", required: ["type"], properties: { type: str, text: str } } },
    thinking: str,
  },
} as const;

const countProperties = {
  model: { type: "string", minLength: 1 },
  messages: {
    type: "array",
    minItems: 1,
    items: {
      type: "object",
      required: ["role", "content"],
      properties: { role: { type: "string", enum: ["user", "assistant"] }, content: { type: ["string", "array"], items: block } },
    },
  },
  system: { type: ["string", "array"], items: { type: "object", required: ["type"], properties: { type: str, text: str } } },
  tools: {
    type: "array",
    items: {
      type: "object",
      required: ["name"],
      properties: { name: { type: "string", minLength: 1, pattern: "^[^\\s]+$" }, description: str, input_schema: { type: "object" } },
    },
  },
  tool_choice: {
    type: "object",
    required: ["type"],
    properties: { type: { type: "string", enum: ["auto", "any", "tool", "none"] }, name: str },
  },
  thinking: {
    type: "object",
    required: ["type"],
    properties: {
      type: { type: "string", enum: ["enabled", "disabled", "adaptive"] },
      budget_tokens: { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
    },
  },
} as const;

const outputFormat = {
  type: ["object", "null"],
  required: ["type", "schema"],
  properties: { type: { type: "string", enum: ["json_schema"] }, schema: { type: "object" } },
} as const;

export const anthropicCountSchema = {
  type: "object",
  required: ["model", "messages"],
  properties: countProperties,
} as const;

export const anthropicMessagesSchema = {
  type: "object",
  required: ["model", "max_tokens", "messages"],
  properties: {
    ...countProperties,
    // Required by Anthropic's API (and by Ollama's adapter); at least one token.
    max_tokens: { type: "integer", minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
    stream: { type: "boolean" },
    stop_sequences: { type: "array", items: str, maxItems: 16 },
    temperature: { type: "number", minimum: 0, maximum: 2 },
    top_p: { type: "number", minimum: 0, maximum: 1 },
    top_k: { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
    output_config: { type: "object", properties: { format: outputFormat } },
    output_format: outputFormat,
  },
} as const;
