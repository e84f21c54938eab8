/**
 * The route table: method + path pattern → handler.
 *
 * Patterns are literal paths (`/api/tags`), a literal prefix with one trailing `:param` segment
 * (`/api/blobs/:digest`, one segment, no slash) or a literal prefix with a trailing `*rest`
 * wildcard (`/v1/models/*model`, one or more segments: model names hold slashes and colons).
 * A literal route wins over a `:param` route, which wins over a wildcard.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { MethodNotAllowedError, NotFoundError } from "../errors.js";
import type { Logger } from "../logger.js";

/** Everything a handler needs about one request. */
export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  /** Values of the route's `:param` / `*rest` segment, URL-decoded. */
  params: Record<string, string>;
  /** Request id: echoed `x-request-id` or a random one; also on the response and every log line. */
  id: string;
  /** pino child logger carrying `reqId`. */
  log: Logger;
  /** Aborted when the client goes away before the response finished. */
  signal: AbortSignal;
  /** `SERVICE_MAX_BODY`: the limit to pass to `readJson`. */
  maxBodyBytes: number;
}

/** A route handler. It responds through `ctx.res` or throws a typed error (see errors.ts). */
export type Handler = (ctx: RequestContext) => Promise<void> | void;

/** A successful match. `route` is the pattern (for metrics: bounded cardinality, unlike paths). */
export interface RouteMatch {
  handler: Handler;
  params: Record<string, string>;
  route: string;
}

interface Route {
  pattern: string;
  prefix: string;
  kind: "literal" | "param" | "wildcard";
  name: string;
  handlers: Map<string, Handler>;
}

/** A small route table; see the file comment for the pattern forms. */
export class Router {
  private readonly routes: Route[] = [];

  /** Registers `handler` for one or more methods on `pattern`. */
  add(method: string | string[], pattern: string, handler: Handler): this {
    const route = this.routeFor(pattern);
    for (const m of Array.isArray(method) ? method : [method]) route.handlers.set(m.toUpperCase(), handler);
    return this;
  }

  /**
   * Finds the handler for `method` on `pathname`.
   * @throws NotFoundError for an unknown path; MethodNotAllowedError (with `Allow`) for a known path.
   */
  match(method: string, pathname: string): RouteMatch {
    const found = this.find(pathname);
    if (!found) throw new NotFoundError(`path '${pathname}' not found`);
    const { route, params } = found;
    const m = method.toUpperCase();
    const handler = route.handlers.get(m) ?? (m === "HEAD" ? route.handlers.get("GET") : undefined);
    if (handler) return { handler, params, route: route.pattern };
    if (m === "OPTIONS") return { handler: optionsHandler(allowed(route)), params, route: route.pattern };
    throw new MethodNotAllowedError(m, pathname, allowed(route));
  }

  private find(pathname: string): { route: Route; params: Record<string, string> } | undefined {
    let best: { route: Route; params: Record<string, string> } | undefined;
    for (const route of this.routes) {
      const params = matchRoute(route, pathname);
      if (params && (!best || rank(route) < rank(best.route))) best = { route, params };
    }
    return best;
  }

  private routeFor(pattern: string): Route {
    const existing = this.routes.find((r) => r.pattern === pattern);
    if (existing) return existing;
    const route = parsePattern(pattern);
    this.routes.push(route);
    return route;
  }
}

function parsePattern(pattern: string): Route {
  if (!pattern.startsWith("/")) throw new Error(`route pattern must start with '/': ${pattern}`);
  const slash = pattern.lastIndexOf("/");
  const last = pattern.slice(slash + 1);
  const prefix = pattern.slice(0, slash + 1);
  const handlers = new Map<string, Handler>();
  if (/[:*]/.test(prefix)) throw new Error(`only the last segment of a route may be a parameter: ${pattern}`);
  if (last.startsWith(":")) return { pattern, prefix, kind: "param", name: last.slice(1), handlers };
  if (last.startsWith("*")) return { pattern, prefix, kind: "wildcard", name: last.slice(1), handlers };
  return { pattern, prefix: pattern, kind: "literal", name: "", handlers };
}

function matchRoute(route: Route, pathname: string): Record<string, string> | undefined {
  if (route.kind === "literal") return pathname === route.prefix ? {} : undefined;
  if (!pathname.startsWith(route.prefix)) return undefined;
  const rest = pathname.slice(route.prefix.length);
  if (rest === "" || (route.kind === "param" && rest.includes("/"))) return undefined;
  const value = decode(rest);
  return value === undefined ? undefined : { [route.name]: value };
}

function decode(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined; // malformed %-escape: treated as an unknown path
  }
}

function rank(route: Route): number {
  return route.kind === "literal" ? 0 : route.kind === "param" ? 1 : 2;
}

/** The methods a route answers: its own, HEAD wherever GET is, and OPTIONS. */
function allowed(route: Route): string[] {
  const methods = new Set(route.handlers.keys());
  if (methods.has("GET")) methods.add("HEAD");
  methods.add("OPTIONS");
  return [...methods];
}

/** A plain OPTIONS (not a CORS preflight; the CORS guard answers those): 204 with `Allow`. */
function optionsHandler(allow: string[]): Handler {
  return ({ res }) => {
    res.writeHead(204, { allow: allow.join(", ") });
    res.end();
  };
}
