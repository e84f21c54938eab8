/**
 * `POST /api/chat`: parse → validate → schedule → respond.
 *
 * The messages are rendered with the model's Go template when it has one (Modelfile TEMPLATE, as
 * Ollama does), else with the GGUF's own chat template (in the runner); `tools` let the
 * model answer with `message.tool_calls`, whose results come back as `tool` messages; `format`
 * constrains the answer by grammar. Streams NDJSON unless `stream:false`. Empty `messages` is the
 * load form, and with `keep_alive: 0` the unload form.
 */
import type { ChatFinal, ChatMessage, ChatRequest, ChatResponseMessage, ChatTool } from "../api/chat-types.js";
import { chatSchema } from "../api/chat-schemas.js";
import type { DebugRenderAnswer } from "../api/types.js";
import { BadRequestError } from "../errors.js";
import { readJson } from "../http/body.js";
import { NdjsonStream, outputFlow, sendJson } from "../http/respond.js";
import type { RequestContext, Router } from "../http/router.js";
import { compileValidator } from "../http/validate.js";
import { renderChat, runChat } from "../chat/run.js";
import { loadOrUnload, requireCompletion, resolveTarget } from "../chat/target.js";
import type { ChatTurn, TokenLogprob, ToolCallSpec, ToolSpec } from "../chat/types.js";
import { isoNow } from "../units.js";
import { parseFormat, parseKeepAlive } from "./generate.js";
import { ollamaLogprobs, toOllama } from "./logprobs.js";
import { finalStats, toOllamaCalls } from "./ollama-wire.js";
import type { Services } from "../chat/services.js";

const validate = compileValidator<ChatRequest>(chatSchema, { asGo: true });

export function chatRoutes(router: Router, services: Services): void {
  router.add("POST", "/api/chat", (ctx) => chat(ctx, services));
}

async function chat(ctx: RequestContext, services: Services): Promise<void> {
  const started = process.hrtime.bigint();
  const body = validate(await readJson(ctx.req, services.config.maxBodyBytes));
  const keepAliveMs = parseKeepAlive(body.keep_alive);
  const grammar = parseFormat(body.format);
  const target = await resolveTarget(services, body.model, body.options, keepAliveMs, ctx.log);
  const stamp = () => ({ model: body.model, created_at: isoNow() });
  const messages = body.messages ?? [];

  if (messages.length === 0) {
    // As Ollama: the unload form works on any model, the load form needs one that can chat.
    if (target.keepAliveMs !== 0) await requireCompletion(services, target, "chat");
    const reason = await loadOrUnload(services, ctx.signal, target);
    return sendJson(ctx.res, 200, { ...stamp(), message: { role: "assistant", content: "" }, done: true, done_reason: reason } satisfies ChatFinal);
  }
  if (messages.some((m) => m.images?.length)) throw new BadRequestError(`model '${body.model}' does not support images`);
  const turns = messages.map(toTurn);
  const tools = toToolSpecs(body.tools);
  // The same call for the render and the run: `_debug_render_only` shows the prompt the run evaluates.
  const call = { turns, tools, grammar, think: body.think, truncate: body.truncate };
  if (body._debug_render_only) {
    const rendered = await renderChat(services, ctx.signal, target, call);
    return sendJson(ctx.res, 200, { ...stamp(), _debug_info: { rendered_template: rendered } } satisfies DebugRenderAnswer);
  }

  const stream = body.stream !== false ? new NdjsonStream(ctx.res) : undefined;
  const chunk = (message: ChatResponseMessage) => void stream?.write({ ...stamp(), message, done: false });
  let content = "";
  let thinking = "";
  const logprobs = ollamaLogprobs(body);
  let streamed = 0; // tool calls already sent (their indexes go on from there)
  const calls: ToolCallSpec[] = [];
  // Streaming: a call goes out in its own chunk as soon as the engine has it (a Go template's as it
  // is parsed, as Ollama streams it; a GGUF template's when the answer ends), before the final object.
  const onToolCalls = (parsed: ToolCallSpec[]) => {
    if (!stream) return void calls.push(...parsed);
    chunk({ role: "assistant", content: "", tool_calls: toOllamaCalls(parsed, streamed, true) });
    streamed += parsed.length;
  };
  const allLogprobs: TokenLogprob[] = [];
  const { stats, loadNs } = await runChat(services, target, { ...call, logprobs }, {
    signal: ctx.signal,
    flow: outputFlow(ctx.res),
    onText: (text, lps) => {
      if (stream) void stream.write({ ...stamp(), message: { role: "assistant", content: text }, done: false, ...(lps ? { logprobs: toOllama(lps) } : {}) });
      else {
        content += text;
        if (lps) allLogprobs.push(...lps);
      }
    },
    onThinking: (text) => (stream ? chunk({ role: "assistant", content: "", thinking: text }) : (thinking += text)),
    onToolCalls,
  });
  if (stats.doneReason === "cancelled") return; // the client is gone
  const toolCalls = toOllamaCalls(calls, 0, true);
  const message: ChatResponseMessage = { role: "assistant", content: stream ? "" : content };
  if (!stream && thinking) message.thinking = thinking;
  if (!stream && toolCalls.length > 0) message.tool_calls = toolCalls;
  const final: ChatFinal = {
    ...stamp(),
    message,
    done: true,
    done_reason: stats.doneReason,
    ...finalStats(started, loadNs, stats),
    ...(!stream && logprobs !== undefined ? { logprobs: toOllama(allLogprobs) } : {}),
  };
  if (stream) stream.end(final);
  else sendJson(ctx.res, 200, final);
}

/** An Ollama message → a runner turn; tool-call arguments may come as an object or a JSON string. */
export function toTurn(m: ChatMessage, index: number): ChatTurn {
  const toolCalls = m.tool_calls?.map((c, j) => ({
    ...(c.id ? { id: c.id } : {}),
    name: c.function.name,
    arguments: toArguments(c.function.arguments, `messages[${index}].tool_calls[${j}].function.arguments`),
  }));
  const ids = m.tool_call_id ? { toolCallId: m.tool_call_id } : {};
  return {
    role: m.role,
    content: m.content ?? "",
    ...(toolCalls?.length ? { toolCalls } : {}),
    ...(m.tool_name ? { toolName: m.tool_name } : {}),
    ...ids,
    ...(m.thinking ? { thinking: m.thinking } : {}),
  };
}

/** Tool-call arguments as an object: objects pass, JSON strings of objects are parsed, anything else is a 400. */
export function toArguments(value: unknown, path: string): Record<string, unknown> {
  let parsed = value;
  if (typeof value === "string") {
    try {
      parsed = value.trim() === "" ? {} : (JSON.parse(value) as unknown);
    } catch {
      throw new BadRequestError(`invalid value for parameter '${path}': not valid JSON`);
    }
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    throw new BadRequestError(`invalid type for parameter '${path}': expected object`);
  return parsed as Record<string, unknown>;
}

/** Tools → runner specs; names must be unique. */
export function toToolSpecs(tools: ChatTool[] | null | undefined): ToolSpec[] | undefined {
  if (!tools?.length) return undefined;
  const seen = new Set<string>();
  return tools.map((t) => {
    const { name, description, parameters } = t.function;
    if (seen.has(name)) throw new BadRequestError(`duplicate tool name '${name}'`);
    seen.add(name);
    return { name, description, parameters };
  });
}

