/**
 * `POST /v1/embeddings`: an adapter over the embed service of `/api/embed` (normalized vectors).
 * `encoding_format: "base64"` (what the OpenAI SDKs ask for by default) is little-endian float32.
 */
import type { OpenAIEmbeddingRequest } from "../../api/chat-types.js";
import { openaiEmbeddingSchema } from "../../api/chat-schemas.js";
import { readJson } from "../../http/body.js";
import { sendJson } from "../../http/respond.js";
import type { RequestContext } from "../../http/router.js";
import { compileValidator } from "../../http/validate.js";
import { normalize, runEmbed } from "../../chat/embed.js";
import { resolveTarget } from "../../chat/target.js";
import type { Services } from "../../chat/services.js";

const validate = compileValidator<OpenAIEmbeddingRequest>(openaiEmbeddingSchema);

export async function embeddings(ctx: RequestContext, services: Services): Promise<void> {
  const body = validate(await readJson(ctx.req, services.config.maxBodyBytes));
  const inputs = typeof body.input === "string" ? [body.input] : body.input;
  const target = await resolveTarget(services, body.model, undefined, undefined, ctx.log);
  const { result } = await runEmbed(services, ctx.signal, target, inputs, true, body.dimensions);
  const data = result.embeddings.map((v, index) => {
    const vector = normalize(v, body.dimensions);
    const embedding = body.encoding_format === "base64" ? Buffer.from(new Float32Array(vector).buffer).toString("base64") : vector;
    return { object: "embedding", embedding, index };
  });
  sendJson(ctx.res, 200, { object: "list", data, model: body.model, usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens } });
}
