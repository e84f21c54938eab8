/**
 * `POST /api/generate`: parse → validate → schedule → respond.
 *
 * Streams NDJSON by default and answers one object with `stream:false`. `prompt:""` is the load
 * form, and with `keep_alive:0` the unload form. Loading happens before the first byte, so a load
 * failure is a real 500; an error after the stream started becomes its last line.
 */
import type { DebugRenderAnswer, GenerateFinal, GenerateRequest, Format } from "../api/types.js";
import { generateSchema } from "../api/schemas.js";
import { renderGenerate, runGenerate } from "../chat/generate.js";
import { loadOrUnload, requireCompletion, resolveTarget } from "../chat/target.js";
import type { GrammarSpec, TokenLogprob, ToolCallSpec } from "../chat/types.js";
import { BadRequestError } from "../errors.js";
import { readJson } from "../http/body.js";
import { NdjsonStream, outputFlow, sendJson } from "../http/respond.js";
import type { RequestContext, Router } from "../http/router.js";
import { compileValidator } from "../http/validate.js";
import { isoNow, parseDuration } from "../units.js";
import { ollamaLogprobs, toOllama } from "./logprobs.js";
import { finalStats, toOllamaCalls } from "./ollama-wire.js";
import type { Services } from "../chat/services.js";

const validate = compileValidator<GenerateRequest>(generateSchema, { asGo: true });

export function generateRoutes(router: Router, services: Services): void {
  router.add("POST", "/api/generate", (ctx) => generate(ctx, services));
}

async function generate(ctx: RequestContext, services: Services): Promise<void> {
  const started = process.hrtime.bigint();
  const body = validate(await readJson(ctx.req, services.config.maxBodyBytes));
  const keepAliveMs = parseKeepAlive(body.keep_alive);
  const grammar = parseFormat(body.format);
  const target = await resolveTarget(services, body.model, body.options, keepAliveMs, ctx.log);
  const stamp = () => ({ model: body.model, created_at: isoNow(), response: "" });
  // As Ollama: the unload form works on any model; everything else needs one that completes text.
  if (!(body.prompt === "" && !body.context?.length && keepAliveMs === 0)) await requireCompletion(services, target, "generate");

  if (body.prompt === "" && !body.context?.length) {
    const doneReason = await loadOrUnload(services, ctx.signal, target);
    return sendJson(ctx.res, 200, { ...stamp(), done: true, done_reason: doneReason } satisfies GenerateFinal);
  }
  if (body._debug_render_only) {
    const rendered = await renderGenerate(services, ctx.signal, target, body);
    return sendJson(ctx.res, 200, { model: body.model, created_at: isoNow(), _debug_info: { rendered_template: rendered } } satisfies DebugRenderAnswer);
  }

  const stream = body.stream !== false ? new NdjsonStream(ctx.res) : undefined;
  let text = "";
  let thoughts = "";
  let thinking = ""; // the thought of the piece whose text comes next (chat/generate.ts)
  const calls: ToolCallSpec[] = [];
  const logprobs = ollamaLogprobs(body);
  const allLogprobs: TokenLogprob[] = [];
  const onText = (response: string, lps?: TokenLogprob[]) => {
    const thought = thinking;
    thinking = "";
    if (!response && !thought && !lps) return;
    // The runner pauses this generation while the socket does not drain (outputFlow).
    if (stream)
      void stream.write({ ...stamp(), response, ...(thought ? { thinking: thought } : {}), done: false, ...(lps ? { logprobs: toOllama(lps) } : {}) });
    else {
      text += response;
      thoughts += thought;
      if (lps) allLogprobs.push(...lps);
    }
  };
  const sink = {
    signal: ctx.signal,
    flow: outputFlow(ctx.res),
    onText,
    onThinking: (t: string) => void (thinking += t),
    onToolCalls: (c: ToolCallSpec[]) => void calls.push(...c),
  };
  const { stats, loadNs } = await runGenerate(services, target, body, grammar, logprobs, sink);
  if (stats.truncatedTokens > 0)
    ctx.log.warn({ model: target.model.display, truncated: stats.truncatedTokens }, "prompt longer than the context; truncated from the front");
  if (stats.doneReason === "cancelled") return; // the client is gone
  const final: GenerateFinal = {
    ...stamp(),
    response: stream ? "" : text,
    ...(!stream && thoughts ? { thinking: thoughts } : {}),
    ...(calls.length ? { tool_calls: toOllamaCalls(calls) } : {}),
    done: true,
    done_reason: stats.doneReason,
    context: stats.context,
    ...finalStats(started, loadNs, stats),
    ...(!stream && logprobs !== undefined ? { logprobs: toOllama(allLogprobs) } : {}),
  };
  if (stream) stream.end(final);
  else sendJson(ctx.res, 200, final);
}

/** `keep_alive`: seconds as a number, or a duration string; negative keeps the model loaded forever. */
export function parseKeepAlive(value: string | number | undefined): number | undefined {
  if (value === undefined || value === "") return undefined;
  const ms = parseDuration(value);
  if (ms === undefined || !Number.isFinite(ms))
    throw new BadRequestError(`invalid value for parameter 'keep_alive': '${String(value).slice(0, 40)}' is not a duration`);
  return Math.round(ms);
}

/** `format`: `"json"` or a JSON Schema object, enforced by a grammar in the runner. */
export function parseFormat(format: Format | undefined): GrammarSpec | undefined {
  if (format === undefined || format === "") return undefined;
  if (format === "json") return { kind: "json" };
  if (typeof format === "object" && format !== null && !Array.isArray(format)) return { kind: "schema", schema: format };
  throw new BadRequestError(`invalid value for parameter 'format': expected "json" or a JSON schema`);
}
