/**
 * JSON Schemas of the chat, embed and `/v1` request bodies (compiled by `http/validate.ts`, which
 * turns the first violation into the 400 message clients see). Ranges are those docs/errors.md lists.
 * Unknown fields are allowed and ignored.
 */
import { optionsSchema } from "./schemas.js";

const model = { type: "string", minLength: 1 } as const;
const keepAlive = { type: ["string", "number"] } as const;
const format = { type: ["string", "object"] } as const;
const str = { type: "string" } as const;
const nullable = (schema: Record<string, unknown>) => ({ ...schema, type: [schema.type, "null"] });

const tool = {
  type: "object",
  required: ["function"],
  properties: {
    type: { type: "string", enum: ["function"] },
    function: {
      type: "object",
      required: ["name"],
      properties: { name: { type: "string", minLength: 1, pattern: "^[^\\s]+$" }, description: str, parameters: { type: "object" } },
    },
  },
} as const;

const toolCall = {
  type: "object",
  required: ["function"],
  properties: {
    id: str,
    function: { type: "object", required: ["name"], properties: { name: str, arguments: { type: ["object", "string"] } } },
  },
} as const;

export const chatSchema = {
  type: "object",
  required: ["model"],
  properties: {
    model,
    messages: {
      type: ["array", "null"],
      items: {
        type: "object",
        required: ["role"],
        properties: {
          role: { type: "string", enum: ["system", "user", "assistant", "tool"] },
          content: str,
          thinking: str,
          images: { type: ["array", "null"], items: str },
          tool_calls: { type: ["array", "null"], items: toolCall },
          tool_name: str,
          tool_call_id: str,
        },
      },
    },
    tools: { type: ["array", "null"], items: tool },
    format,
    options: optionsSchema,
    stream: { type: "boolean" },
    keep_alive: keepAlive,
    think: { type: ["boolean", "string"], enum: [true, false, "high", "medium", "low", "max"] },
    _debug_render_only: { type: "boolean" },
    truncate: { type: "boolean" },
    logprobs: { type: "boolean" },
    top_logprobs: { type: "integer", minimum: 0, maximum: 20 },
  },
} as const;

export const embedSchema = {
  type: "object",
  required: ["model"],
  properties: {
    model,
    input: { type: ["string", "array"], items: str },
    truncate: { type: "boolean" },
    dimensions: { type: "integer", minimum: 1, maximum: 1_000_000 },
    keep_alive: keepAlive,
    options: optionsSchema,
  },
} as const;

export const embeddingsSchema = {
  type: "object",
  required: ["model"],
  properties: { model, prompt: str, keep_alive: keepAlive, options: optionsSchema },
} as const;

// ---- /v1: OpenAI's names, the same ranges ----

const sampling = {
  model,
  stream: { type: ["boolean", "null"] },
  stream_options: { type: ["object", "null"], properties: { include_usage: { type: ["boolean", "null"] } } },
  max_tokens: nullable({ type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
  temperature: nullable({ type: "number", minimum: 0, maximum: 2 }),
  top_p: nullable({ type: "number", minimum: 0, maximum: 1 }),
  seed: nullable({ type: "integer", minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER }),
  presence_penalty: nullable({ type: "number", minimum: -2, maximum: 2 }),
  frequency_penalty: nullable({ type: "number", minimum: -2, maximum: 2 }),
  stop: { type: ["string", "array", "null"], items: str, maxItems: 16 },
  n: nullable({ type: "integer", minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
} as const;

const openaiContent = { type: ["string", "array", "null"], items: { type: "object", required: ["type"], properties: { type: str, text: str } } } as const;

export const openaiChatSchema = {
  type: "object",
  required: ["model", "messages"],
  properties: {
    ...sampling,
    max_completion_tokens: nullable({ type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
    logprobs: { type: ["boolean", "null"] },
    top_logprobs: nullable({ type: "integer", minimum: 0, maximum: 20 }),
    messages: {
      type: "array",
      minItems: 1,
      items: {
        type: "object",
        required: ["role"],
        properties: {
          role: { type: "string", enum: ["system", "developer", "user", "assistant", "tool"] },
          content: openaiContent,
          name: { type: ["string", "null"] },
          tool_call_id: { type: ["string", "null"] },
          reasoning: { type: ["string", "null"] },
          tool_calls: {
            type: ["array", "null"],
            items: {
              type: "object",
              required: ["function"],
              properties: { id: str, function: { type: "object", required: ["name"], properties: { name: str, arguments: str } } },
            },
          },
        },
      },
    },
    tools: { type: ["array", "null"], items: tool },
    tool_choice: {
      anyOf: [
        { type: "null" },
        { type: "string", enum: ["none", "auto", "required"] },
        { type: "object", required: ["function"], properties: { function: { type: "object", required: ["name"], properties: { name: str } } } },
      ],
    },
    response_format: {
      type: ["object", "null"],
      required: ["type"],
      properties: {
        type: { type: "string", enum: ["text", "json_object", "json_schema"] },
        json_schema: { type: "object", properties: { name: str, schema: { type: "object" }, strict: { type: ["boolean", "null"] } } },
      },
    },
    reasoning_effort: { type: ["string", "null"] },
    reasoning: { type: ["object", "null"], properties: { effort: { type: ["string", "null"] } } },
  },
} as const;

export const openaiCompletionSchema = {
  type: "object",
  required: ["model", "prompt"],
  properties: {
    ...sampling,
    prompt: { type: ["string", "array"], items: str, maxItems: 1 },
    suffix: { type: ["string", "null"] },
    echo: { type: ["boolean", "null"] },
    logprobs: nullable({ type: "integer", minimum: 0, maximum: 20 }),
  },
} as const;

export const openaiEmbeddingSchema = {
  type: "object",
  required: ["model", "input"],
  properties: {
    model,
    input: { type: ["string", "array"], items: str },
    encoding_format: { type: "string", enum: ["float", "base64"] },
    dimensions: { type: "integer", minimum: 1, maximum: 1_000_000 },
  },
} as const;
