/**
 * Anthropic's Messages API: `POST /v1/messages` and `POST /v1/messages/count_tokens`, adapters over
 * the chat service of `/api/chat`, so coding agents written for Anthropic's API can
 * point at lmd. Streams Anthropic's named SSE events (stream.ts); otherwise one `message` object.
 *
 * Errors keep the contract's `{"error": "<message>"}` body with the real status: the official SDKs
 * pick their error class by status (400 → BadRequestError, 404 → NotFoundError, 5xx →
 * InternalServerError). An error during a stream is an `event: error` with that body.
 * API keys and the `anthropic-version` header are accepted and ignored.
 */
import type { AnthropicCountRequest, AnthropicOutputBlock, AnthropicRequest, AnthropicResponse } from "../../api/anthropic.js";
import { anthropicCountSchema, anthropicMessagesSchema } from "../../api/anthropic.js";
import { readJson } from "../../http/body.js";
import { NamedSseStream, outputFlow, sendJson } from "../../http/respond.js";
import type { RequestContext, Router } from "../../http/router.js";
import { compileValidator } from "../../http/validate.js";
import { countChatTokens, runChat } from "../../chat/run.js";
import { resolveTarget } from "../../chat/target.js";
import type { ToolCallSpec } from "../../chat/types.js";
import type { Services } from "../../chat/services.js";
import { anthropicId, stopReason, toChatCall, toGrammar, toOptions, toolUseBlocks, usageOf } from "./convert.js";
import { MessageEvents } from "./stream.js";

const validateMessages = compileValidator<AnthropicRequest>(anthropicMessagesSchema);
const validateCount = compileValidator<AnthropicCountRequest>(anthropicCountSchema);

export function anthropicRoutes(router: Router, services: Services): void {
  router.add("POST", "/v1/messages", (ctx) => messages(ctx, services));
  router.add("POST", "/v1/messages/count_tokens", (ctx) => countTokens(ctx, services));
}

async function messages(ctx: RequestContext, services: Services): Promise<void> {
  const body = validateMessages(await readJson(ctx.req, services.config.maxBodyBytes));
  const call = { ...toChatCall(body, body.model), grammar: toGrammar(body) };
  const target = await resolveTarget(services, body.model, toOptions(body), undefined, ctx.log);
  const head = { id: anthropicId("msg"), model: body.model };
  const stream = body.stream ? new NamedSseStream(ctx.res) : undefined;
  const events = stream ? new MessageEvents(head, (event) => void stream.write(event)) : undefined;
  let text = "";
  let thinking = "";
  const calls: ToolCallSpec[] = [];
  const { stats } = await runChat(services, target, call, {
    signal: ctx.signal,
    flow: outputFlow(ctx.res),
    onText: (delta) => (events ? events.text(delta) : (text += delta)),
    onThinking: (delta) => (events ? events.thinking(delta) : (thinking += delta)),
    // tool_use blocks follow the text, when the answer ends.
    onToolCalls: (parsed) => void calls.push(...parsed),
  });
  if (stats.doneReason === "cancelled") return; // the client is gone
  const uses = toolUseBlocks(calls);
  const reason = stopReason(stats, uses.length);
  const stopSequence = reason === "stop_sequence" ? (stats.stopSequence ?? null) : null;
  if (events && stream) {
    events.finish(uses, reason, stopSequence, usageOf(stats));
    return stream.end();
  }
  const content: AnthropicOutputBlock[] = [];
  if (thinking) content.push({ type: "thinking", thinking, signature: "" });
  if (text || uses.length === 0) content.push({ type: "text", text });
  content.push(...uses);
  const message: AnthropicResponse = {
    ...head,
    type: "message",
    role: "assistant",
    content,
    stop_reason: reason,
    stop_sequence: stopSequence,
    usage: usageOf(stats),
  };
  sendJson(ctx.res, 200, message);
}

/** The prompt's tokens as the model's template renders it (llama-server's endpoint does the same). */
async function countTokens(ctx: RequestContext, services: Services): Promise<void> {
  const body = validateCount(await readJson(ctx.req, services.config.maxBodyBytes));
  const call = toChatCall(body, body.model);
  const target = await resolveTarget(services, body.model, undefined, undefined, ctx.log);
  sendJson(ctx.res, 200, { input_tokens: await countChatTokens(services, ctx.signal, target, call) });
}
