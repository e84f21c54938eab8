/**
 * `GET /healthz` and `GET /readyz` for load balancers and orchestrators.
 *
 * - `/healthz`: the process is alive and its HTTP loop answers (liveness). Never touches a model.
 * - `/readyz`: the daemon accepts new requests (not draining). With `?model=NAME`: that model is
 *   loaded and has a free slot now, so a request sent here starts at once instead of queueing
 *   behind a load or other streams. Otherwise 503 with `Retry-After`, so a balancer's health check
 *   (HAProxy `http-check`, nginx `proxy_next_upstream http_503`) routes around a busy, loading,
 *   draining or cold host. It reads scheduler state only and never loads a model.
 */
import { NotReadyError, ShuttingDownError } from "../errors.js";
import { sendJson } from "../http/respond.js";
import type { RequestContext, Router } from "../http/router.js";
import type { Services } from "../chat/services.js";

export function healthRoutes(router: Router, services: Services): void {
  router.add(["GET", "HEAD"], "/healthz", (ctx) => sendJson(ctx.res, 200, { status: "ok" }));
  router.add(["GET", "HEAD"], "/readyz", (ctx) => ready(ctx, services));
}

async function ready(ctx: RequestContext, { store, scheduler }: Services): Promise<void> {
  const name = ctx.url.searchParams.get("model");
  if (!scheduler.readiness().accepting) throw new ShuttingDownError();
  if (name === null) return sendJson(ctx.res, 200, { status: "ready" });
  const model = await store.resolve(name); // 400 for an invalid name, 404 for a missing model
  const state = scheduler.readiness(model.key);
  if (!state.loaded) throw new NotReadyError(`model '${name}' is not loaded`);
  if (state.freeSlots === 0) throw new NotReadyError(`model '${name}' has no free slot (${state.queued} waiting)`);
  sendJson(ctx.res, 200, { status: "ready", model: name, free_slots: state.freeSlots });
}
