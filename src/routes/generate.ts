/**
 * `POST /api/generate` (seed: "Endpoints"; CONTRACT §4): parse → validate → schedule → respond.
 *
 * Streams NDJSON by default and answers one object with `stream:false`. `prompt:""` is the load
 * form, and with `keep_alive:0` the unload form. Loading happens before the first byte, so a load
 * failure is a real 500; an error after the stream started becomes its last line.
 */
import type { DebugRenderAnswer, GenerateFinal, GenerateRequest, Format } from "../api/types.js";
import { generateSchema } from "../api/schemas.js";
import { BadRequestError } from "../errors.js";
import { readJson } from "../http/body.js";
import { NdjsonStream, outputFlow, sendJson } from "../http/respond.js";
import type { RequestContext, Router } from "../http/router.js";
import { compileValidator } from "../http/validate.js";
import type { GrammarSpec } from "../runner/protocol.js";
import { isoNow, parseDuration } from "../units.js";
import { emptyStats, finalStats, loadOrUnload, requireCompletion, resolveTarget, withLease } from "./completion.js";
import { checkGenerate, generatePrompt, promptText, quickRender } from "./generate-prompt.js";
import { runtimeOf } from "./template-chat.js";
import { HarmonyOutput } from "../template/harmony.js";
import { type OutputParser, OutputSplitter, toOllamaCalls } from "./prompt.js";
import type { TokenLogprob } from "../runner/protocol.js";
import { ollamaLogprobs, toOllama } from "./logprobs.js";
import type { Services } from "./services.js";

const validate = compileValidator<GenerateRequest>(generateSchema);

export function generateRoutes(router: Router, services: Services): void {
  router.add("POST", "/api/generate", (ctx) => generate(ctx, services));
}

async function generate(ctx: RequestContext, services: Services): Promise<void> {
  const started = process.hrtime.bigint();
  const body = validate(await readJson(ctx.req, services.config.maxBodyBytes));
  const keepAliveMs = parseKeepAlive(body.keep_alive);
  const grammar = parseFormat(body.format);
  const target = await resolveTarget(services, body.model, body.options, keepAliveMs, ctx.log);
  const { model, opts } = target;
  const stamp = () => ({ model: body.model, created_at: isoNow(), response: "" });
  // As Ollama: the unload form works on any model; everything else needs one that completes text.
  if (!(body.prompt === "" && !body.context?.length && keepAliveMs === 0)) await requireCompletion(services, target, "generate");

  if (body.prompt === "" && !body.context?.length) {
    const doneReason = await loadOrUnload(services, ctx, target);
    return sendJson(ctx.res, 200, { ...stamp(), done: true, done_reason: doneReason } satisfies GenerateFinal);
  }
  const template = checkGenerate(body, model);
  const debug = (rendered: string) => sendJson(ctx.res, 200, { model: body.model, created_at: isoNow(), _debug_info: { rendered_template: rendered } } satisfies DebugRenderAnswer);
  if (body._debug_render_only && template) {
    const quick = await quickRender(body, model, template, opts.numCtx ?? services.config.contextLength);
    if (quick !== undefined) return debug(quick);
  }

  await withLease(services, ctx, target, async (lease) => {
    const built = await generatePrompt(body, model, template, { ...runtimeOf(lease, ctx.signal), info: lease.runner.info });
    if (body._debug_render_only) return debug(await promptText(built, lease, ctx.signal));
    const stream = body.stream !== false ? new NdjsonStream(ctx.res) : undefined;
    let text = "";
    let thoughts = "";
    const harmony = built.harmony ? new HarmonyOutput() : undefined;
    // A constrained harmony answer: the prompt opens the final channel (template-chat.ts).
    const prompt = harmony && grammar && built.prompt.kind === "text" ? { ...built.prompt, text: built.prompt.text + harmony.openFinal() } : built.prompt;
    const tags = prompt.kind === "chat" ? lease.runner.info.thoughts : undefined;
    const splitter: OutputParser | undefined =
      harmony ??
      (built.template && prompt.kind === "text"
        ? new OutputSplitter(built.template, { think: built.think !== undefined && built.think !== false, prompt: prompt.text })
        : tags && prompt.kind === "chat" && prompt.think !== false
          ? new OutputSplitter(tags, { think: true, prompt: tags.opened ? tags.open : "" })
          : undefined);
    const logprobs = ollamaLogprobs(body);
    const allLogprobs: TokenLogprob[] = [];
    const job = { prompt, sampling: opts.sampling, maxTokens: opts.maxTokens, fillContext: opts.fillContext, stop: opts.stop, grammar, logprobs, truncate: body.truncate ?? services.config.truncate, specialTokens: built.harmony };
    const onText = (response: string, thinking: string, lps: TokenLogprob[] | undefined) => {
      if (!response && !thinking && !lps) return;
      // The runner pauses this generation while the socket does not drain (outputFlow).
      if (stream) void stream.write({ ...stamp(), response, ...(thinking ? { thinking } : {}), done: false, ...(lps ? { logprobs: toOllama(lps) } : {}) });
      else {
        text += response;
        thoughts += thinking;
        if (lps) allLogprobs.push(...lps);
      }
    };
    const onChunk = (chunk: string, lps?: TokenLogprob[]) => {
      if (!splitter) return onText(chunk, "", lps);
      const p = splitter.add(chunk);
      onText(p.content, p.thinking, lps);
    };
    const stats = opts.maxTokens === 0 ? emptyStats("length", body.context ?? []) : await lease.runner.generate(job, onChunk, ctx.signal, outputFlow(ctx.res));
    if (stats.truncatedTokens > 0) ctx.log.warn({ model: model.display, truncated: stats.truncatedTokens }, "prompt longer than the context; truncated from the front");
    if (stats.doneReason === "cancelled") return; // the client is gone
    // What the parser held to the end: a harmony answer's tool call comes in the last object (as Ollama's).
    const rest = splitter?.end();
    if (rest) onText(rest.content, rest.thinking, undefined);
    const final: GenerateFinal = {
      ...stamp(),
      response: stream ? "" : text,
      ...(!stream && thoughts ? { thinking: thoughts } : {}),
      ...(rest?.calls.length ? { tool_calls: toOllamaCalls(rest.calls) } : {}),
      done: true,
      done_reason: stats.doneReason,
      context: stats.context,
      ...finalStats(started, lease.loadNs, stats),
      ...(!stream && logprobs !== undefined ? { logprobs: toOllama(allLogprobs) } : {}),
    };
    if (stream) stream.end(final);
    else sendJson(ctx.res, 200, final);
  });
}

/** `keep_alive`: seconds as a number, or a duration string; negative keeps the model loaded forever. */
export function parseKeepAlive(value: string | number | undefined): number | undefined {
  if (value === undefined || value === "") return undefined;
  const ms = parseDuration(value);
  if (ms === undefined || !Number.isFinite(ms)) throw new BadRequestError(`invalid value for parameter 'keep_alive': '${String(value).slice(0, 40)}' is not a duration`);
  return Math.round(ms);
}

/** `format`: `"json"` or a JSON Schema object, enforced by a grammar in the runner. */
export function parseFormat(format: Format | undefined): GrammarSpec | undefined {
  if (format === undefined || format === "") return undefined;
  if (format === "json") return { kind: "json" };
  if (typeof format === "object" && format !== null && !Array.isArray(format)) return { kind: "schema", schema: format };
  throw new BadRequestError(`invalid value for parameter 'format': expected "json" or a JSON schema`);
}
