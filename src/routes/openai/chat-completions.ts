/**
 * `POST /v1/chat/completions`: an adapter over the chat service of `/api/chat`. Streams SSE
 * `chat.completion.chunk` events ending in `data: [DONE]` (with a usage chunk first when
 * `stream_options.include_usage`); otherwise one `chat.completion`.
 */
import type { OpenAIChatRequest } from "../../api/chat-types.js";
import { openaiChatSchema } from "../../api/chat-schemas.js";
import { readJson } from "../../http/body.js";
import { outputFlow, sendJson, SseStream } from "../../http/respond.js";
import type { RequestContext } from "../../http/router.js";
import { compileValidator } from "../../http/validate.js";
import { runChat } from "../../chat/run.js";
import { resolveTarget } from "../../chat/target.js";
import type { TokenLogprob, ToolCallSpec } from "../../chat/types.js";
import { toOpenAIContent } from "../logprobs.js";
import type { Services } from "../../chat/services.js";
import {
  finishReason,
  responseId,
  SYSTEM_FINGERPRINT,
  toGrammar,
  toOpenAICalls,
  toOptions,
  toToolChoice,
  toThink,
  toTools,
  toTurns,
  unixNow,
  usageOf,
} from "./convert.js";

const validate = compileValidator<OpenAIChatRequest>(openaiChatSchema);

export async function chatCompletions(ctx: RequestContext, services: Services): Promise<void> {
  const body = validate(await readJson(ctx.req, services.config.maxBodyBytes));
  const turns = toTurns(body.messages, body.model);
  const tools = toTools(body);
  const toolChoice = toToolChoice(body, tools);
  const grammar = toGrammar(body);
  const target = await resolveTarget(services, body.model, toOptions(body, body.max_completion_tokens ?? body.max_tokens), undefined, ctx.log);
  const head = { id: responseId("chatcmpl"), created: unixNow(), model: body.model, system_fingerprint: SYSTEM_FINGERPRINT };
  const stream = body.stream ? new SseStream(ctx.res) : undefined;
  const chunk = (delta: Record<string, unknown>, finish: string | null = null, lps?: TokenLogprob[]) =>
    stream?.write({
      ...head,
      object: "chat.completion.chunk",
      choices: [{ index: 0, delta, logprobs: lps ? { content: toOpenAIContent(lps), refusal: null } : null, finish_reason: finish }],
    });
  let content = "";
  let reasoning = "";
  const logprobs = body.logprobs ? (body.top_logprobs ?? 0) : undefined;
  const allLogprobs: TokenLogprob[] = [];
  const calls: ToolCallSpec[] = [];
  const { stats } = await runChat(services, target, { turns, tools, toolChoice, grammar, think: toThink(body), logprobs }, {
    signal: ctx.signal,
    flow: outputFlow(ctx.res),
    onText: (text, lps) => {
      if (stream) void chunk({ role: "assistant", content: text }, null, lps);
      else {
        content += text;
        if (lps) allLogprobs.push(...lps);
      }
    },
    onThinking: (text) => (stream ? void chunk({ role: "assistant", content: "", reasoning: text }) : (reasoning += text)),
    // The calls go out together at the end, in one chunk or in the message.
    onToolCalls: (parsed) => void calls.push(...parsed),
  });
  if (stats.doneReason === "cancelled") return; // the client is gone
  const toolCalls = toOpenAICalls(calls);
  const finish = finishReason(stats, toolCalls.length);
  const usage = usageOf(stats);
  if (stream) {
    if (toolCalls.length > 0) void chunk({ role: "assistant", tool_calls: toolCalls.map((c, index) => ({ index, ...c })) });
    void chunk({}, finish);
    if (body.stream_options?.include_usage) void stream.write({ ...head, object: "chat.completion.chunk", choices: [], usage });
    return stream.done();
  }
  const message = {
    role: "assistant",
    content: toolCalls.length > 0 && content === "" ? null : content,
    ...(reasoning ? { reasoning } : {}),
    ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
  };
  sendJson(ctx.res, 200, {
    ...head,
    object: "chat.completion",
    choices: [{ index: 0, message, logprobs: logprobs === undefined ? null : { content: toOpenAIContent(allLogprobs), refusal: null }, finish_reason: finish }],
    usage,
  });
}
