/**
 * `GET`/`HEAD /` and `GET /api/version`.
 */
import type { Router } from "../http/router.js";
import { sendJson, sendText } from "../http/respond.js";
import type { VersionResponse } from "../api/types.js";
import type { Services } from "../chat/services.js";

export function rootRoutes(router: Router, services: Services): void {
  router.add(["GET", "HEAD"], "/", (ctx) => sendText(ctx.res, 200, "lmd is running"));
  router.add(["GET", "HEAD"], "/api/version", (ctx) => sendJson(ctx.res, 200, { version: services.version } satisfies VersionResponse));
}
