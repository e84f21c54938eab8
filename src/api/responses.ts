/**
 * Wire types and the JSON Schema of OpenAI's Responses API as lmd accepts it (`POST /v1/responses`,
 * stateless). A leaf, like types.ts. Unknown fields are allowed and ignored (`store`, `metadata`,
 * `truncation`, `parallel_tool_calls`); ranges are those of the other endpoints.
 */

export interface ResponsesContentPart {
  type: string;
  text?: string;
}

/** An input item: a message (the `type` may be left out), a function call, or its output. */
export interface ResponsesInputItem {
  type?: string;
  role?: "user" | "assistant" | "system" | "developer";
  content?: string | ResponsesContentPart[];
  call_id?: string;
  name?: string;
  arguments?: string;
  output?: string | ResponsesContentPart[];
}

export interface ResponsesFunctionTool {
  type: string;
  name?: string;
  description?: string | null;
  parameters?: Record<string, unknown> | null;
  strict?: boolean | null;
}

export type ResponsesToolChoice = "none" | "auto" | "required" | { type: string; name?: string };

export interface ResponsesTextFormat {
  type: "text" | "json_object" | "json_schema";
  name?: string;
  schema?: Record<string, unknown>;
  strict?: boolean | null;
}

export interface ResponsesRequest {
  model: string;
  input: string | ResponsesInputItem[];
  instructions?: string | null;
  tools?: ResponsesFunctionTool[] | null;
  tool_choice?: ResponsesToolChoice | null;
  text?: { format?: ResponsesTextFormat | null } | null;
  max_output_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  stream?: boolean | null;
  previous_response_id?: string | null;
  /** With `include: ["message.output_text.logprobs"]`: alternatives per output token (0–20). */
  top_logprobs?: number | null;
  include?: string[] | null;
  /** A thinking model's effort, as on /v1/chat/completions ("none" turns its thoughts off). */
  reasoning?: { effort?: string | null } | null;
}

const str = { type: "string" } as const;
const nullable = (schema: Record<string, unknown>) => ({ ...schema, type: [schema.type, "null"] });
const parts = { type: ["string", "array"], items: { type: "object", required: ["type"], properties: { type: str, text: str } } } as const;

export const responsesSchema = {
  type: "object",
  required: ["model", "input"],
  properties: {
    model: { type: "string", minLength: 1 },
    input: {
      type: ["string", "array"],
      items: {
        type: "object",
        properties: {
          type: str,
          role: { type: "string", enum: ["user", "assistant", "system", "developer"] },
          content: parts,
          call_id: str,
          name: str,
          arguments: str,
          output: parts,
        },
      },
    },
    instructions: { type: ["string", "null"] },
    tools: {
      type: ["array", "null"],
      items: {
        type: "object",
        required: ["type"],
        properties: {
          type: str,
          name: { type: "string", minLength: 1, pattern: "^[^\\s]+$" },
          description: { type: ["string", "null"] },
          parameters: { type: ["object", "null"] },
        },
      },
    },
    tool_choice: {
      anyOf: [
        { type: "string", enum: ["none", "auto", "required"] },
        { type: "object", required: ["type"], properties: { type: str, name: str } },
        { type: "null" },
      ],
    },
    text: {
      type: ["object", "null"],
      properties: {
        format: {
          type: ["object", "null"],
          required: ["type"],
          properties: { type: { type: "string", enum: ["text", "json_object", "json_schema"] }, name: str, schema: { type: "object" } },
        },
      },
    },
    max_output_tokens: nullable({ type: "integer", minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
    temperature: nullable({ type: "number", minimum: 0, maximum: 2 }),
    top_p: nullable({ type: "number", minimum: 0, maximum: 1 }),
    stream: { type: ["boolean", "null"] },
    previous_response_id: { type: ["string", "null"] },
    top_logprobs: nullable({ type: "integer", minimum: 0, maximum: 20 }),
    include: { type: ["array", "null"], items: str },
    reasoning: { type: ["object", "null"], properties: { effort: { type: ["string", "null"] } } },
  },
} as const;
