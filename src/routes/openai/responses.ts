/**
 * `POST /v1/responses`: OpenAI's Responses API, stateless, as an adapter over the chat service of
 * `/api/chat`. Streams named SSE events (responses-stream.ts; no `[DONE]`, as OpenAI's stream);
 * otherwise one `response` object.
 */
import type { ResponsesRequest } from "../../api/responses.js";
import { responsesSchema } from "../../api/responses.js";
import { readJson } from "../../http/body.js";
import { NamedSseStream, outputFlow, sendJson } from "../../http/respond.js";
import type { RequestContext } from "../../http/router.js";
import { compileValidator } from "../../http/validate.js";
import type { GenerateStats, ToolCallSpec } from "../../chat/types.js";
import { runChat } from "../../chat/run.js";
import { resolveTarget } from "../../chat/target.js";
import { toOpenAIContent } from "../logprobs.js";
import type { Services } from "../../chat/services.js";
import { toChatCall, toOptions } from "./responses-convert.js";
import { ResponseOutput } from "./responses-stream.js";

const validate = compileValidator<ResponsesRequest>(responsesSchema);

export async function responses(ctx: RequestContext, services: Services): Promise<void> {
  const body = validate(await readJson(ctx.req, services.config.maxBodyBytes));
  const call = toChatCall(body, body.model);
  const target = await resolveTarget(services, body.model, toOptions(body), undefined, ctx.log);
  const stream = body.stream ? new NamedSseStream(ctx.res) : undefined;
  const output = new ResponseOutput(echo(body, target.opts.sampling), stream ? (event) => void stream.write(event) : undefined);
  // OpenAI's way to ask for them: `include: ["message.output_text.logprobs"]`, `top_logprobs: N`.
  const logprobs = body.include?.includes("message.output_text.logprobs") ? (body.top_logprobs ?? 0) : undefined;
  const calls: ToolCallSpec[] = [];
  const { stats } = await runChat(services, target, { ...call, logprobs }, {
    signal: ctx.signal,
    flow: outputFlow(ctx.res),
    onText: (text, lps) => output.text(text, lps ? toOpenAIContent(lps) : []),
    onThinking: (text) => output.reasoning(text),
    // The calls are output items of their own, written when the answer ends.
    onToolCalls: (parsed) => void calls.push(...parsed),
  });
  if (stats.doneReason === "cancelled") return; // the client is gone
  const response = output.finish(calls, stats.doneReason === "length", usageOf(stats));
  if (stream) stream.end();
  else sendJson(ctx.res, 200, response);
}

/** The request's settings as OpenAI echoes them in every response object. */
function echo(body: ResponsesRequest, sampling: { temperature: number; topP: number }): Record<string, unknown> {
  return {
    model: body.model,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: false,
    temperature: sampling.temperature,
    text: { format: body.text?.format ?? { type: "text" } },
    tool_choice: body.tool_choice ?? "auto",
    tools: body.tools ?? [],
    top_p: sampling.topP,
    top_logprobs: body.top_logprobs ?? 0,
    // lmd drops the oldest turns of an input over the context (SERVICE_TRUNCATE), OpenAI's "auto".
    truncation: "auto",
    metadata: {},
  };
}

/** `input_tokens` is the whole prompt; `cached_tokens` the part taken from the slot's cache. */
function usageOf(stats: GenerateStats): Record<string, unknown> {
  return {
    input_tokens: stats.promptTokens,
    input_tokens_details: { cached_tokens: Math.max(0, stats.promptTokens - stats.promptEvalCount) },
    output_tokens: stats.evalCount,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: stats.promptTokens + stats.evalCount,
    truncated_tokens: stats.truncatedTokens, // lmd: prompt tokens dropped to fit the context
  };
}
