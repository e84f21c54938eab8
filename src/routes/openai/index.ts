/**
 * The OpenAI-compatible `/v1` API (adapters over the engine `/api` uses). Errors are
 * the contract's `{"error": string}` with their real status; the OpenAI SDKs map the status to
 * their error classes (404 → NotFoundError, 400 → BadRequestError).
 */
import type { Router } from "../../http/router.js";
import type { Services } from "../../chat/services.js";
import { chatCompletions } from "./chat-completions.js";
import { completions } from "./completions.js";
import { embeddings } from "./embeddings.js";
import { listOpenAIModels, showOpenAIModel } from "./models.js";
import { responses } from "./responses.js";

export function openaiRoutes(router: Router, services: Services): void {
  router.add("POST", "/v1/chat/completions", (ctx) => chatCompletions(ctx, services));
  router.add("POST", "/v1/completions", (ctx) => completions(ctx, services));
  router.add("POST", "/v1/embeddings", (ctx) => embeddings(ctx, services));
  router.add("POST", "/v1/responses", (ctx) => responses(ctx, services));
  router.add("GET", "/v1/models", (ctx) => listOpenAIModels(ctx, services));
  router.add("GET", "/v1/models/*model", (ctx) => showOpenAIModel(ctx, services));
}
