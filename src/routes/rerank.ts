/**
 * `POST /v1/rerank` and its alias `POST /api/rerank` (llama-server also answers `/v1/rerank`):
 * `{model, query, documents, top_n}` → `{model, object: "list", usage, results: [{index,
 * relevance_score}]}` sorted by score, highest first, cut to `top_n`. The score is node-llama-cpp's
 * ranking probability (a sigmoid of the classification head's logit, in [0, 1], as Jina and Cohere
 * report; llama-server reports the raw logit). A model without a classification head is a 400.
 */
import { rerankSchema, type RerankRequest, type RerankResponse } from "../api/rerank.js";
import { readJson } from "../http/body.js";
import { sendJson } from "../http/respond.js";
import type { RequestContext, Router } from "../http/router.js";
import { compileValidator } from "../http/validate.js";
import { runRank } from "../chat/embed.js";
import { resolveTarget } from "../chat/target.js";
import { parseKeepAlive } from "./generate.js";
import type { Services } from "../chat/services.js";

const validate = compileValidator<RerankRequest>(rerankSchema);

export function rerankRoutes(router: Router, services: Services): void {
  router.add("POST", "/v1/rerank", (ctx) => rerank(ctx, services));
  router.add("POST", "/api/rerank", (ctx) => rerank(ctx, services));
}

async function rerank(ctx: RequestContext, services: Services): Promise<void> {
  const body = validate(await readJson(ctx.req, services.config.maxBodyBytes));
  const target = await resolveTarget(services, body.model, undefined, parseKeepAlive(body.keep_alive), ctx.log);
  const documents = body.documents.map((d) => (typeof d === "string" ? d : d.text));
  const result = await runRank(services, ctx.signal, target, body.query, documents);
  const results = result.scores
    .map((relevance_score, index) => ({ index, relevance_score, ...(body.return_documents ? { document: { text: documents[index] ?? "" } } : {}) }))
    // Stable: equal scores keep their input order.
    .sort((a, b) => b.relevance_score - a.relevance_score)
    .slice(0, body.top_n ?? documents.length);
  sendJson(ctx.res, 200, {
    model: body.model,
    object: "list",
    usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens },
    results,
  } satisfies RerankResponse);
}
