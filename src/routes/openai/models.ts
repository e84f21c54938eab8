/**
 * `GET /v1/models` and `GET /v1/models/{model}` (model names hold `/` and `:`, hence the wildcard).
 * An unknown model is the contract's 404, which the OpenAI SDKs raise as NotFoundError.
 */
import type { OpenAIModel } from "../../api/chat-types.js";
import { sendJson } from "../../http/respond.js";
import type { RequestContext } from "../../http/router.js";
import type { ModelName } from "../../store/names.js";
import { listModels } from "../../store/admin.js";
import type { Services } from "../../chat/services.js";

function entry(id: string, name: ModelName, modifiedAt: Date): OpenAIModel {
  return { id, object: "model", created: Math.floor(modifiedAt.getTime() / 1000), owned_by: name.namespace };
}

export async function listOpenAIModels(ctx: RequestContext, services: Services): Promise<void> {
  const models = await listModels(services.store);
  sendJson(ctx.res, 200, { object: "list", data: models.map((m) => entry(m.display, m.name, m.modifiedAt)) });
}

export async function showOpenAIModel(ctx: RequestContext, services: Services): Promise<void> {
  const id = ctx.params.model ?? "";
  const model = await services.store.resolve(id);
  sendJson(ctx.res, 200, entry(id, model.name, model.modifiedAt));
}
