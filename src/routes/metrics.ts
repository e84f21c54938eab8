/**
 * `GET /metrics`: Prometheus text format (prom-client) — requests by route and status, queue depth,
 * loaded models, tokens evaluated and generated, time-to-first-token and tokens-per-second.
 */
import { sendText } from "../http/respond.js";
import type { Router } from "../http/router.js";
import type { Metrics } from "../metrics.js";

export function metricsRoutes(router: Router, metrics: Metrics): void {
  router.add("GET", "/metrics", async (ctx) => {
    const body = await metrics.registry.metrics();
    sendText(ctx.res, 200, body, { "content-type": metrics.registry.contentType });
  });
}
