/**
 * Chat turns as the model's own chat template sees them (runner child): node-llama-cpp's chat
 * wrapper for the GGUF's `tokenizer.chat_template` (Jinja templates included), the history it
 * renders, and the functions a chat job offers the model. Shared by the chat, generate and render
 * jobs and by the load, which reports what the template supports.
 */
import {
  LlamaText,
  resolveChatWrapper,
  type ChatHistoryItem,
  type ChatModelFunctionCall,
  type ChatModelFunctions,
  type ChatModelResponse,
  type ChatWrapper,
  type ChatWrapperGeneratedContextState,
  type GbnfJsonSchema,
  type LlamaModel,
} from "node-llama-cpp";
import type { ChatJob, ChatTurn } from "../types.js";

const wrappers = new WeakMap<LlamaModel, ChatWrapper>();

/** The model's chat wrapper (resolved once per model). */
export function chatWrapperOf(model: LlamaModel): ChatWrapper {
  let wrapper = wrappers.get(model);
  if (!wrapper) {
    wrapper = resolveChatWrapper(model);
    wrappers.set(model, wrapper);
  }
  return wrapper;
}

/** True when the model's chat template knows thought segments (`think` is supported). */
export function supportsThinking(model: LlamaModel): boolean {
  return chatWrapperOf(model).settings.segments?.thought != null;
}

/**
 * The same wrapper, but the model's answer starts inside a function call: LlamaChat then injects
 * the wrapper's call prefix and generates the name and the arguments under grammars. This is how
 * `tool_choice: "required"` (or a named function) is enforced, even for a model with random weights.
 */
export function forcingToolCall(wrapper: ChatWrapper): ChatWrapper {
  const forced = Object.create(wrapper) as ChatWrapper;
  forced.generateContextState = (options): ChatWrapperGeneratedContextState => {
    const state = wrapper.generateContextState.call(forced, options);
    // Wrappers whose answers may open in function mode (Functionary): open in it, with no way out.
    if (state.functionCall) return { ...state, functionCall: { initiallyEngaged: true, disengageInitiallyEngaged: [] } };
    const { ignoreStartText: _ignore, functionCall: _call, prefixTriggers: _triggers, ...rest } = state;
    // Without prefix triggers, LlamaChat performs `noPrefixTrigger` at once. The inject is empty:
    // the function-name mode evaluates the call prefix itself (a non-empty one would repeat it).
    return { ...rest, noPrefixTrigger: { type: "functionCall", inject: LlamaText("") } };
  };
  return forced;
}

/** Ollama/OpenAI turns → node-llama-cpp's history. Tool results join the call they answer. */
export function toHistory(turns: readonly ChatTurn[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = [];
  let open: ChatModelResponse | undefined; // the model turn that tool results and a continuation join
  for (const turn of turns) {
    if (turn.role === "system") history.push({ type: "system", text: turn.content });
    else if (turn.role === "user") history.push({ type: "user", text: turn.content });
    else if (turn.role === "assistant") {
      const item: ChatModelResponse = open ?? { type: "model", response: [] };
      if (!open) history.push(item);
      if (turn.content) item.response.push(turn.content);
      for (const call of turn.toolCalls ?? []) item.response.push({ type: "functionCall", name: call.name, params: call.arguments, result: undefined });
      open = turn.toolCalls?.length ? item : undefined;
      continue;
    } else {
      const call = open && unanswered(open, turn.toolName);
      if (call) call.result = parseResult(turn.content);
      else history.push({ type: "user", text: turn.content }); // a result without its call: plain context
      continue;
    }
    open = undefined;
  }
  const last = history[history.length - 1];
  // A trailing assistant turn is continued (prefill); a trailing tool result is answered in the same turn.
  if (last?.type !== "model") history.push({ type: "model", response: [] });
  // A call the messages give no result for is shown with an empty one.
  for (const item of history) if (item.type === "model") for (const r of item.response) if (typeof r !== "string" && r.type === "functionCall") r.result ??= "";
  return history;
}

function unanswered(item: ChatModelResponse, name: string | undefined): ChatModelFunctionCall | undefined {
  const calls = item.response.filter((r): r is ChatModelFunctionCall => typeof r !== "string" && r.type === "functionCall" && r.result === undefined);
  return (name ? calls.find((c) => c.name === name) : undefined) ?? calls[0];
}

/** A tool result that is JSON is shown to the model as JSON, anything else as text. */
function parseResult(content: string): unknown {
  try {
    return JSON.parse(content) as unknown;
  } catch {
    return content;
  }
}

/** The functions a chat job offers the model: none with a `format` or `tool_choice: "none"`, only the named one when a tool is named. */
export function functionsOf(job: ChatJob): ChatModelFunctions | undefined {
  if (!job.tools?.length || job.grammar || job.toolChoice === "none") return undefined;
  const named = typeof job.toolChoice === "object" ? job.toolChoice.name : undefined;
  const functions: Record<string, { description?: string; params?: GbnfJsonSchema }> = {};
  for (const tool of job.tools) {
    if (named !== undefined && tool.name !== named) continue;
    functions[tool.name] = {
      ...(tool.description ? { description: tool.description } : {}),
      ...(tool.parameters ? { params: tool.parameters as GbnfJsonSchema } : {}),
    };
  }
  return functions;
}
