/**
 * `POST /api/embed` (batch: `input` string or array, `truncate`, `dimensions`; L2-normalized
 * vectors) and the older `POST /api/embeddings` (`prompt` → one raw `embedding`, not normalized,
 * as Ollama answers it). An empty input is the load form.
 */
import type { EmbedRequest, EmbedResponse, EmbeddingsRequest, EmbeddingsResponse } from "../api/chat-types.js";
import { embedSchema, embeddingsSchema } from "../api/chat-schemas.js";
import { readJson } from "../http/body.js";
import { sendJson } from "../http/respond.js";
import type { RequestContext, Router } from "../http/router.js";
import { compileValidator } from "../http/validate.js";
import { normalize, runEmbed } from "../chat/embed.js";
import { resolveTarget } from "../chat/target.js";
import { parseKeepAlive } from "./generate.js";
import type { Services } from "../chat/services.js";

const validateEmbed = compileValidator<EmbedRequest>(embedSchema, { asGo: true });
const validateEmbeddings = compileValidator<EmbeddingsRequest>(embeddingsSchema, { asGo: true });

export function embedRoutes(router: Router, services: Services): void {
  router.add("POST", "/api/embed", (ctx) => embed(ctx, services));
  router.add("POST", "/api/embeddings", (ctx) => embeddings(ctx, services));
}

async function embed(ctx: RequestContext, services: Services): Promise<void> {
  const started = process.hrtime.bigint();
  const body = validateEmbed(await readJson(ctx.req, services.config.maxBodyBytes));
  const target = await resolveTarget(services, body.model, body.options, parseKeepAlive(body.keep_alive), ctx.log);
  // As Ollama: an empty string is no input (the load form), as an empty array is.
  const inputs = body.input === undefined || body.input === "" ? [] : typeof body.input === "string" ? [body.input] : body.input;
  const { result, loadNs } = await runEmbed(services, ctx.signal, target, inputs, body.truncate !== false, body.dimensions);
  sendJson(ctx.res, 200, {
    model: body.model,
    embeddings: result.embeddings.map((v) => normalize(v, body.dimensions)),
    total_duration: Number(process.hrtime.bigint() - started),
    load_duration: loadNs,
    prompt_eval_count: result.promptTokens,
  } satisfies EmbedResponse);
}

async function embeddings(ctx: RequestContext, services: Services): Promise<void> {
  const body = validateEmbeddings(await readJson(ctx.req, services.config.maxBodyBytes));
  const target = await resolveTarget(services, body.model, body.options, parseKeepAlive(body.keep_alive), ctx.log);
  const inputs = body.prompt ? [body.prompt] : [];
  const { result } = await runEmbed(services, ctx.signal, target, inputs, true);
  sendJson(ctx.res, 200, { embedding: result.embeddings[0] ?? [] } satisfies EmbeddingsResponse);
}
