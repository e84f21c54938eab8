/**
 * Access guards of CONTRACT §5: the Host check (DNS-rebinding defence while bound to loopback) and
 * CORS. No credentials are checked here or anywhere in the daemon: it never answers 401.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { isLoopbackHost, type Config } from "../config.js";
import { ForbiddenError } from "../errors.js";

/** Methods announced to preflights. */
export const CORS_METHODS = "GET, POST, PUT, DELETE, HEAD, OPTIONS";

/** Headers allowed when a preflight does not list its own (OpenAI SDKs send `x-stainless-*`). */
export const CORS_DEFAULT_HEADERS = [
  "authorization", "content-type", "user-agent", "accept", "x-requested-with", "x-request-id",
  "x-stainless-arch", "x-stainless-async", "x-stainless-lang", "x-stainless-os", "x-stainless-package-version",
  "x-stainless-retry-count", "x-stainless-runtime", "x-stainless-runtime-version", "x-stainless-timeout",
].join(", ");

/** Origins always allowed: loopback web pages and the desktop/editor shells Ollama's clients use. */
const DEFAULT_ORIGINS: readonly RegExp[] = [
  /^https?:\/\/(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?$/,
  ...["app", "file", "tauri", "vscode-webview"].map((scheme) => new RegExp(`^${scheme}://.*$`)),
];

/** The two guards the server runs before routing. */
export interface Guards {
  /** Refuses a Host header that does not name this machine while bound to loopback. */
  checkHost(req: IncomingMessage): void;
  /** Adds CORS headers; answers a preflight and returns true (then nothing else runs). */
  cors(req: IncomingMessage, res: ServerResponse): boolean;
}

/** Builds the guards for a configuration. */
export function createGuards(config: Pick<Config, "listen" | "allowedHosts" | "origins">): Guards {
  const guardHost = isLoopbackHost(config.listen.host);
  const allowedHosts = new Set(config.allowedHosts.map((h) => h.toLowerCase()));
  const origins = [...DEFAULT_ORIGINS, ...config.origins.map(originPattern)];
  return {
    checkHost(req) {
      if (!guardHost) return; // bound to a real interface: the operator chose to expose it
      const host = req.headers.host;
      if (host === undefined && req.httpVersion === "1.0") return; // HTTP/1.0 has no Host; browsers always send one
      if (!isAllowedHost(host ?? "", allowedHosts)) throw new ForbiddenError(`host '${host ?? ""}' is not allowed`);
    },
    cors(req, res) {
      const origin = req.headers.origin;
      if (origin === undefined) return false;
      res.setHeader("vary", "origin");
      const preflight = req.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined;
      if (!origins.some((re) => re.test(origin))) {
        // A disallowed origin on a simple request gets no CORS headers and is otherwise served:
        // the browser then withholds the response from the page. Refusing with 403 instead would
        // also refuse non-browser clients that happen to send Origin, and protects nothing more,
        // since the Host guard already stops DNS rebinding. Preflights are refused outright.
        if (preflight) throw new ForbiddenError(`origin '${origin}' is not allowed`);
        return false;
      }
      res.setHeader("access-control-allow-origin", origin);
      res.setHeader("access-control-expose-headers", "retry-after, x-request-id");
      if (!preflight) return false;
      answerPreflight(req, res);
      return true;
    },
  };
}

function answerPreflight(req: IncomingMessage, res: ServerResponse): void {
  const requested = req.headers["access-control-request-headers"];
  const headers = typeof requested === "string" && /^[A-Za-z0-9!#$%&'*+.^_`|~,\s-]+$/.test(requested) ? requested : CORS_DEFAULT_HEADERS;
  res.setHeader("vary", "origin, access-control-request-headers");
  res.setHeader("access-control-allow-methods", CORS_METHODS);
  res.setHeader("access-control-allow-headers", headers);
  res.setHeader("access-control-max-age", "86400");
  // Chrome's Private Network Access asks before a public page reaches loopback; an origin the
  // operator allowed is allowed to do that too.
  if (req.headers["access-control-request-private-network"] === "true") res.setHeader("access-control-allow-private-network", "true");
  res.writeHead(204);
  res.end();
}

/** True for a Host naming loopback (any port, `*.localhost` too) or one of `allowed`. */
export function isAllowedHost(host: string, allowed: ReadonlySet<string>): boolean {
  const full = host.toLowerCase();
  const name = hostname(full).replace(/\.$/, ""); // a trailing dot is the same DNS name
  if (name === "") return false;
  return isLoopbackHost(name) || allowed.has(full) || allowed.has(name);
}

/** `example.com:8080` → `example.com`; `[::1]:80` → `[::1]`. */
function hostname(host: string): string {
  if (host.startsWith("[")) {
    const end = host.indexOf("]");
    return end < 0 ? host : host.slice(0, end + 1);
  }
  const colon = host.indexOf(":");
  return colon < 0 ? host : host.slice(0, colon);
}

/** A configured origin: exact (case-insensitive), `*` matching any run of characters, `*` alone all. */
function originPattern(entry: string): RegExp {
  if (entry === "*") return /^/;
  const body = entry.split("*").map((part) => part.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")).join(".*");
  return new RegExp(`^${body}$`, "i");
}
