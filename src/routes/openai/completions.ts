/**
 * `POST /v1/completions`: raw text completion (the prompt is evaluated as given, without the chat
 * template, as llama.cpp's server does), an adapter over the same runner job as `/api/generate`.
 * With a `suffix` it is fill-in-the-middle, rendered as `/api/generate` renders a prompt and suffix
 * (the template's `.Suffix`), as Ollama does here.
 */
import type { OpenAICompletionRequest } from "../../api/chat-types.js";
import { openaiCompletionSchema } from "../../api/chat-schemas.js";
import { readJson } from "../../http/body.js";
import { outputFlow, sendJson, SseStream } from "../../http/respond.js";
import type { RequestContext } from "../../http/router.js";
import { compileValidator } from "../../http/validate.js";
import { runGenerate } from "../../chat/generate.js";
import { checkGenerate } from "../../chat/generate-prompt.js";
import { runCompletion } from "../../chat/run.js";
import { requireCompletion, resolveTarget } from "../../chat/target.js";
import type { TokenLogprob } from "../../chat/types.js";
import { toLegacy } from "../logprobs.js";
import type { Services } from "../../chat/services.js";
import { finishReason, responseId, SYSTEM_FINGERPRINT, toOptions, unixNow, usageOf } from "./convert.js";

const validate = compileValidator<OpenAICompletionRequest>(openaiCompletionSchema);

export async function completions(ctx: RequestContext, services: Services): Promise<void> {
  const body = validate(await readJson(ctx.req, services.config.maxBodyBytes));
  const prompt = typeof body.prompt === "string" ? body.prompt : (body.prompt[0] ?? "");
  const target = await resolveTarget(services, body.model, toOptions(body), undefined, ctx.log);
  await requireCompletion(services, target, "generate");
  const fim = body.suffix ? { model: body.model, prompt, suffix: body.suffix } : undefined;
  if (fim) checkGenerate(fim, target.model); // its 400 before any byte of a stream (echo writes one at once)
  const head = { id: responseId("cmpl"), object: "text_completion", created: unixNow(), model: body.model, system_fingerprint: SYSTEM_FINGERPRINT };
  const choice = (text: string, finish: string | null, logprobs: Record<string, unknown> | null = null) => ({
    ...head,
    choices: [{ text, index: 0, logprobs, finish_reason: finish }],
  });
  const stream = body.stream ? new SseStream(ctx.res) : undefined;
  let text = body.echo ? prompt : "";
  if (stream && text) void stream.write(choice(text, null));
  // text_offset counts from the start of the returned text (the prompt too, with echo).
  const offset = text.length;
  let streamed = offset;
  const logprobs = body.logprobs ?? undefined;
  const allLogprobs: TokenLogprob[] = [];
  const onText = (chunk: string, lps?: TokenLogprob[]) => {
    if (stream) {
      void stream.write(choice(chunk, null, lps ? toLegacy(lps, streamed) : null));
      streamed += chunk.length;
    } else {
      text += chunk;
      if (lps) allLogprobs.push(...lps);
    }
  };
  const sink = { signal: ctx.signal, flow: outputFlow(ctx.res), onText };
  const { stats } = fim ? await runGenerate(services, target, fim, undefined, logprobs, sink) : await runCompletion(services, target, prompt, logprobs, sink);
  if (stats.doneReason === "cancelled") return; // the client is gone
  const usage = usageOf(stats);
  if (stream) {
    void stream.write(choice("", finishReason(stats)));
    if (body.stream_options?.include_usage) void stream.write({ ...head, choices: [], usage });
    return stream.done();
  }
  sendJson(ctx.res, 200, { ...choice(text, finishReason(stats), logprobs === undefined ? null : toLegacy(allLogprobs, offset)), usage });
}
