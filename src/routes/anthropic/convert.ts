/**
 * Translations between Anthropic's Messages API and lmd's chat service: messages and their content
 * blocks → chat turns, tools and `tool_choice` → tool specs, sampling fields → Ollama options, and a
 * chat result → the content blocks, stop reason and usage of the answer. Follows Ollama's adapter
 * (its `anthropic` package) where Anthropic's documentation leaves room.
 */
import { randomBytes } from "node:crypto";
import type {
  AnthropicCountRequest,
  AnthropicMessage,
  AnthropicRequest,
  AnthropicResponse,
  AnthropicStopReason,
  AnthropicToolResultBlock,
  AnthropicToolUseBlock,
} from "../../api/anthropic.js";
import type { ModelOptions } from "../../api/types.js";
import { BadRequestError } from "../../errors.js";
import type { ChatTurn, GenerateStats, GrammarSpec, ToolCallSpec, ToolChoice, ToolSpec } from "../../chat/types.js";
import type { ChatCall } from "../../chat/run.js";

/** The chat call of a request: system prompt, turns, tools, tool choice and thinking. */
export function toChatCall(body: AnthropicCountRequest, model: string): ChatCall {
  const turns: ChatTurn[] = [];
  const system = systemText(body.system);
  if (system) turns.push({ role: "system", content: system });
  const callNames = new Map<string, string>();
  body.messages.forEach((m, i) => turns.push(...toTurns(m, i, callNames, model)));
  const tools = toTools(body);
  return { turns, tools, toolChoice: toToolChoice(body, tools), think: toThink(body) };
}

/** `system` as a string or text blocks (joined as Ollama joins them). */
function systemText(system: AnthropicCountRequest["system"]): string {
  if (system === undefined) return "";
  if (typeof system === "string") return system;
  return system.map((b) => (b.type === "text" ? (b.text ?? "") : "")).join("");
}

/**
 * One Anthropic message → chat turns. A user message's `tool_result` blocks become `tool` turns
 * (before its text, as Ollama orders them); an assistant's `tool_use` blocks become its tool calls.
 * Earlier thinking blocks are not shown to the model again.
 */
function toTurns(m: AnthropicMessage, index: number, callNames: Map<string, string>, model: string): ChatTurn[] {
  if (typeof m.content === "string") return [{ role: m.role, content: m.content }];
  let text = "";
  const calls: ToolCallSpec[] = [];
  const results: ChatTurn[] = [];
  m.content.forEach((block, j) => {
    const path = `messages[${index}].content[${j}]`;
    switch (block.type) {
      case "text":
        text += (block as { text?: string }).text ?? "";
        break;
      case "tool_use": {
        const use = block as Partial<AnthropicToolUseBlock>;
        if (!use.id) throw new BadRequestError(`${path}.id is required`);
        if (!use.name) throw new BadRequestError(`${path}.name is required`);
        callNames.set(use.id, use.name);
        calls.push({ id: use.id, name: use.name, arguments: use.input ?? {} });
        break;
      }
      case "tool_result": {
        const result = block as Partial<AnthropicToolResultBlock>;
        const toolName = result.tool_use_id ? callNames.get(result.tool_use_id) : undefined;
        results.push({
          role: "tool",
          content: resultText(result.content, model),
          ...(toolName ? { toolName } : {}),
          ...(result.tool_use_id ? { toolCallId: result.tool_use_id } : {}),
        });
        break;
      }
      case "thinking":
      case "redacted_thinking":
        break;
      case "image":
        throw new BadRequestError(`model '${model}' does not support images`);
      default:
        throw new BadRequestError(`unsupported content block type '${block.type}'`);
    }
  });
  const own: ChatTurn[] = text || calls.length > 0 ? [{ role: m.role, content: text, ...(calls.length > 0 ? { toolCalls: calls } : {}) }] : [];
  return m.role === "user" ? [...results, ...own] : [...own, ...results];
}

function resultText(content: AnthropicToolResultBlock["content"], model: string): string {
  if (content === undefined) return "";
  if (typeof content === "string") return content;
  return content
    .map((b) => {
      if (b.type === "text") return b.text ?? "";
      throw new BadRequestError(b.type === "image" ? `model '${model}' does not support images` : `unsupported content block type '${b.type}'`);
    })
    .join("");
}

function toTools(body: AnthropicCountRequest): ToolSpec[] | undefined {
  if (!body.tools?.length) return undefined;
  const seen = new Set<string>();
  return body.tools.map((t) => {
    if (seen.has(t.name)) throw new BadRequestError(`duplicate tool name '${t.name}'`);
    seen.add(t.name);
    return { name: t.name, description: t.description, parameters: t.input_schema };
  });
}

/** `auto` → auto, `any` → a call is required, `tool` → that tool, `none` → tools not offered. */
function toToolChoice(body: AnthropicCountRequest, tools: ToolSpec[] | undefined): ToolChoice | undefined {
  const choice = body.tool_choice;
  if (!choice || !tools) return undefined;
  if (choice.type === "any") return "required";
  if (choice.type === "tool") {
    const name = "name" in choice ? choice.name : undefined;
    if (!name) throw new BadRequestError("tool_choice.name is required");
    if (!tools.some((t) => t.name === name)) throw new BadRequestError(`invalid value for parameter 'tool_choice': tool '${name}' is not among the tools`);
    return { name };
  }
  return choice.type;
}

/**
 * `thinking: {type: "disabled"}` turns thoughts off. `enabled` keeps the template's default, which
 * reports a thinking model's thoughts as thinking blocks, and is not an error on a model without
 * them: coding agents send it to every model (Ollama relaxes it the same way).
 */
function toThink(body: AnthropicCountRequest): boolean | undefined {
  return body.thinking?.type === "disabled" ? false : undefined;
}

/**
 * `output_config.format` (or its beta name `output_format`): the answer's text is JSON matching the
 * schema, enforced by grammar as `format` is on /api/chat.
 */
export function toGrammar(body: AnthropicRequest): GrammarSpec | undefined {
  const format = body.output_config?.format ?? body.output_format;
  return format ? { kind: "schema", schema: format.schema } : undefined;
}

/** Sampling fields → Ollama options (absent fields keep the model's defaults). */
export function toOptions(body: AnthropicRequest): ModelOptions {
  const options: ModelOptions = { num_predict: body.max_tokens };
  if (body.temperature !== undefined) options.temperature = body.temperature;
  if (body.top_p !== undefined) options.top_p = body.top_p;
  if (body.top_k !== undefined) options.top_k = body.top_k;
  if (body.stop_sequences?.length) options.stop = body.stop_sequences;
  return options;
}

export function stopReason(stats: GenerateStats, toolCalls: number): AnthropicStopReason {
  if (toolCalls > 0) return "tool_use";
  if (stats.stopSequence !== undefined) return "stop_sequence";
  return stats.doneReason === "length" ? "max_tokens" : "end_turn";
}

/** `input_tokens` is the whole prompt (cached tokens included), as Anthropic counts it. */
export function usageOf(stats: GenerateStats): AnthropicResponse["usage"] {
  // truncated_tokens (lmd), only when the prompt lost tokens to fit the context: Anthropic's SDK keeps
  // unknown usage fields of a message, but its stream accumulator drops them from message_delta.
  const usage: AnthropicResponse["usage"] = { input_tokens: stats.promptTokens, output_tokens: stats.evalCount };
  if (stats.truncatedTokens > 0) usage.truncated_tokens = stats.truncatedTokens;
  return usage;
}

export function toolUseBlocks(calls: readonly ToolCallSpec[]): AnthropicToolUseBlock[] {
  return calls.map((c) => ({ type: "tool_use", id: anthropicId("toolu"), name: c.name, input: c.arguments }));
}

export function anthropicId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString("hex")}`;
}
