/**
 * Translations between OpenAI's Responses API and lmd's chat service: `instructions` and `input`
 * items (messages, function calls and their outputs) → chat turns, function tools and
 * `tool_choice` → tool specs, `text.format` → a grammar, `reasoning.effort` → think (as on
 * /v1/chat/completions), sampling fields → Ollama options.
 */
import type { ResponsesContentPart, ResponsesInputItem, ResponsesRequest } from "../../api/responses.js";
import type { ModelOptions } from "../../api/types.js";
import { BadRequestError } from "../../errors.js";
import type { ChatTurn, GrammarSpec, ToolCallSpec, ToolChoice, ToolSpec } from "../../chat/types.js";
import { toArguments } from "../chat.js";
import type { ChatCall } from "../../chat/run.js";
import { toThink } from "./convert.js";

/**
 * The chat call of a request. lmd stores no responses: a `previous_response_id` would silently
 * lose the conversation, so it is refused and the client sends the whole conversation instead.
 */
export function toChatCall(body: ResponsesRequest, model: string): ChatCall {
  if (body.previous_response_id)
    throw new BadRequestError("previous_response_id is not supported: responses are not stored, send the whole conversation in 'input'");
  const turns: ChatTurn[] = body.instructions ? [{ role: "system", content: body.instructions }] : [];
  if (typeof body.input === "string") turns.push({ role: "user", content: body.input });
  else turns.push(...toTurns(body.input, model));
  const tools = toTools(body);
  return { turns, tools, toolChoice: toToolChoice(body, tools), grammar: toGrammar(body), think: toThink(body) };
}

/** Items → turns: consecutive function calls join the assistant turn before them; outputs find their call's name by `call_id`. */
function toTurns(items: readonly ResponsesInputItem[], model: string): ChatTurn[] {
  const turns: ChatTurn[] = [];
  const callNames = new Map<string, string>();
  items.forEach((item, i) => {
    const type = item.type ?? "message";
    if (type === "message") {
      const role = item.role ?? "user";
      turns.push({ role: role === "developer" ? "system" : role, content: textOf(item.content, model) });
    } else if (type === "function_call") {
      if (!item.name) throw new BadRequestError(`input[${i}].name is required`);
      if (item.call_id) callNames.set(item.call_id, item.name);
      const call: ToolCallSpec = {
        ...(item.call_id ? { id: item.call_id } : {}),
        name: item.name,
        arguments: toArguments(item.arguments ?? "", `input[${i}].arguments`),
      };
      const last = turns[turns.length - 1];
      if (last?.role === "assistant" && !hasResults(turns)) (last.toolCalls ??= []).push(call);
      else turns.push({ role: "assistant", content: "", toolCalls: [call] });
    } else if (type === "function_call_output") {
      const toolName = item.call_id ? callNames.get(item.call_id) : undefined;
      turns.push({
        role: "tool",
        content: textOf(item.output, model),
        ...(toolName ? { toolName } : {}),
        ...(item.call_id ? { toolCallId: item.call_id } : {}),
      });
    } else if (type !== "reasoning") throw new BadRequestError(`unsupported input item type '${type}'`);
  });
  return turns;
}

/** A function call after a tool result starts a new assistant turn. */
function hasResults(turns: readonly ChatTurn[]): boolean {
  return turns[turns.length - 1]?.role === "tool";
}

function textOf(content: string | ResponsesContentPart[] | undefined, model: string): string {
  if (content === undefined) return "";
  if (typeof content === "string") return content;
  return content
    .map((part) => {
      if (part.type === "input_text" || part.type === "output_text" || part.type === "text") return part.text ?? "";
      throw new BadRequestError(part.type === "input_image" ? `model '${model}' does not support images` : `unsupported content part type '${part.type}'`);
    })
    .join("");
}

function toTools(body: ResponsesRequest): ToolSpec[] | undefined {
  if (!body.tools?.length) return undefined;
  const seen = new Set<string>();
  return body.tools.map((t, i) => {
    if (t.type !== "function") throw new BadRequestError(`unsupported tool type '${t.type}': only function tools are available`);
    if (!t.name) throw new BadRequestError(`tools[${i}].name is required`);
    if (seen.has(t.name)) throw new BadRequestError(`duplicate tool name '${t.name}'`);
    seen.add(t.name);
    return { name: t.name, description: t.description ?? undefined, parameters: t.parameters ?? undefined };
  });
}

function toToolChoice(body: ResponsesRequest, tools: ToolSpec[] | undefined): ToolChoice | undefined {
  const choice = body.tool_choice;
  if (choice == null || !tools) return undefined;
  if (typeof choice === "string") return choice;
  if (choice.type !== "function" || !choice.name) throw new BadRequestError("invalid value for parameter 'tool_choice': expected a function tool with a name");
  const name = choice.name;
  if (!tools.some((t) => t.name === name)) throw new BadRequestError(`invalid value for parameter 'tool_choice': tool '${name}' is not among the tools`);
  return { name };
}

/** `text.format`: `json_object` → any JSON object, `json_schema` → its schema, both by grammar. */
function toGrammar(body: ResponsesRequest): GrammarSpec | undefined {
  const format = body.text?.format;
  if (!format || format.type === "text") return undefined;
  if (format.type === "json_object") return { kind: "json" };
  if (!format.schema) throw new BadRequestError("text.format.schema is required");
  return { kind: "schema", schema: format.schema };
}

export function toOptions(body: ResponsesRequest): ModelOptions {
  const options: ModelOptions = {};
  if (body.temperature != null) options.temperature = body.temperature;
  if (body.top_p != null) options.top_p = body.top_p;
  if (body.max_output_tokens != null) options.num_predict = body.max_output_tokens;
  return options;
}
