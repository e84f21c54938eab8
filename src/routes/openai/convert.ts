/**
 * Translations between OpenAI's `/v1` bodies and lmd's services: messages → chat turns, sampling
 * fields → Ollama options, tool choices, response formats, and the ids, usage and finish reasons
 * of the answers.
 */
import { randomBytes } from "node:crypto";
import type { OpenAIChatRequest, OpenAIContentPart, OpenAIMessage, OpenAISampling, OpenAIToolCall, OpenAIUsage } from "../../api/chat-types.js";
import type { ModelOptions } from "../../api/types.js";
import { BadRequestError } from "../../errors.js";
import type { ChatTurn, GenerateStats, GrammarSpec, ToolCallSpec, ToolChoice, ToolSpec } from "../../chat/types.js";
import { toArguments } from "../chat.js";

/** The fields OpenAI clients send mapped to Ollama options; absent fields keep the model's own defaults. */
export function toOptions(body: OpenAISampling, maxTokens: number | null | undefined = body.max_tokens): ModelOptions {
  if (body.n != null && body.n !== 1) throw new BadRequestError("n must be 1: one choice per request is supported");
  const options: ModelOptions = {};
  if (body.temperature != null) options.temperature = body.temperature;
  if (body.top_p != null) options.top_p = body.top_p;
  if (body.seed != null) options.seed = body.seed;
  if (body.presence_penalty != null) options.presence_penalty = body.presence_penalty;
  if (body.frequency_penalty != null) options.frequency_penalty = body.frequency_penalty;
  if (body.stop != null) options.stop = body.stop;
  if (maxTokens != null) options.num_predict = maxTokens;
  return options;
}

/** OpenAI messages → chat turns: `developer` is a system turn; a tool result finds its call's name by `tool_call_id`. */
export function toTurns(messages: readonly OpenAIMessage[], model: string): ChatTurn[] {
  const callNames = new Map<string, string>();
  return messages.map((m, i): ChatTurn => {
    const content = textOf(m.content, model);
    if (m.role === "assistant") {
      const toolCalls = m.tool_calls?.map((c: OpenAIToolCall, j): ToolCallSpec => {
        if (c.id) callNames.set(c.id, c.function.name);
        return {
          ...(c.id ? { id: c.id } : {}),
          name: c.function.name,
          arguments: toArguments(c.function.arguments ?? "", `messages[${i}].tool_calls[${j}].function.arguments`),
        };
      });
      return { role: "assistant", content, ...(toolCalls?.length ? { toolCalls } : {}), ...(m.reasoning ? { thinking: m.reasoning } : {}) };
    }
    if (m.role === "tool") {
      const toolName = (m.tool_call_id && callNames.get(m.tool_call_id)) || m.name;
      return { role: "tool", content, ...(toolName ? { toolName } : {}), ...(m.tool_call_id ? { toolCallId: m.tool_call_id } : {}) };
    }
    return { role: m.role === "developer" ? "system" : m.role, content };
  });
}

function textOf(content: string | OpenAIContentPart[] | null | undefined, model: string): string {
  if (content == null) return "";
  if (typeof content === "string") return content;
  return content
    .map((part) => {
      if (part.type === "text") return part.text ?? "";
      throw new BadRequestError(part.type === "image_url" ? `model '${model}' does not support images` : `unsupported content part type '${part.type}'`);
    })
    .join("");
}

/** `tools` as runner specs with names checked unique. */
export function toTools(body: OpenAIChatRequest): ToolSpec[] | undefined {
  if (!body.tools?.length) return undefined;
  const seen = new Set<string>();
  return body.tools.map(({ function: f }) => {
    if (seen.has(f.name)) throw new BadRequestError(`duplicate tool name '${f.name}'`);
    seen.add(f.name);
    return { name: f.name, description: f.description, parameters: f.parameters };
  });
}

/** `tool_choice`; a named function must be one of the tools. */
export function toToolChoice(body: OpenAIChatRequest, tools: ToolSpec[] | undefined): ToolChoice | undefined {
  const choice = body.tool_choice;
  if (choice == null || !tools) return undefined;
  if (typeof choice === "string") return choice;
  const name = choice.function.name;
  if (!tools.some((t) => t.name === name)) throw new BadRequestError(`invalid value for parameter 'tool_choice': tool '${name}' is not among the tools`);
  return { name };
}

/** `response_format`: `json_object` → any JSON object; `json_schema` → its schema, both by grammar. */
export function toGrammar(body: OpenAIChatRequest): GrammarSpec | undefined {
  const format = body.response_format;
  if (!format || format.type === "text") return undefined;
  if (format.type === "json_object") return { kind: "json" };
  const schema = format.json_schema?.schema;
  if (!schema) throw new BadRequestError("response_format.json_schema.schema is required");
  return { kind: "schema", schema };
}

export function toOpenAICalls(calls: readonly ToolCallSpec[]): OpenAIToolCall[] {
  return calls.map((c) => ({
    id: `call_${randomBytes(12).toString("hex")}`,
    type: "function",
    function: { name: c.name, arguments: JSON.stringify(c.arguments) },
  }));
}

export function finishReason(stats: GenerateStats, toolCalls = 0): "stop" | "length" | "tool_calls" {
  if (toolCalls > 0) return "tool_calls";
  return stats.doneReason === "length" ? "length" : "stop";
}

/**
 * `prompt_tokens` is the prompt evaluated (cached tokens included), as OpenAI counts it;
 * `truncated_tokens` (lmd) the prompt tokens dropped to fit the context, which the SDKs pass through.
 */
export function usageOf(stats: GenerateStats): OpenAIUsage {
  return {
    prompt_tokens: stats.promptTokens,
    completion_tokens: stats.evalCount,
    total_tokens: stats.promptTokens + stats.evalCount,
    truncated_tokens: stats.truncatedTokens,
  };
}

export function responseId(prefix: string): string {
  return `${prefix}-${randomBytes(12).toString("hex")}`;
}

export function unixNow(): number {
  return Math.floor(Date.now() / 1000);
}

export const SYSTEM_FINGERPRINT = "fp_lmd";

/**
 * `reasoning.effort` or `reasoning_effort` → `think`, as Ollama's openai layer maps it: "none" is
 * false, "minimal" is "low", the levels pass, and "xhigh" and "ultra" are "max".
 */
export function toThink(body: Pick<OpenAIChatRequest, "reasoning" | "reasoning_effort">): boolean | "low" | "medium" | "high" | "max" | undefined {
  const effort = body.reasoning?.effort ?? body.reasoning_effort ?? "";
  switch (effort) {
    case "": return undefined;
    case "none": return false;
    case "minimal": case "low": return "low";
    case "medium": return "medium";
    case "high": return "high";
    case "max": case "xhigh": case "ultra": return "max";
    default:
      throw new BadRequestError(
        `invalid reasoning value: "${effort.slice(0, 40)}" (must be "minimal", "low", "medium", "high", "xhigh", "ultra", "max", or "none")`,
      );
  }
}
