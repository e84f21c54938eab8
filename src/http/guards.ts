/**
 * Access guards: the Host check (DNS-rebinding defence while bound to loopback) and CORS, so that a
 * web page cannot drive the API through the user's browser. No credentials are checked here or anywhere in the daemon: it never answers 401.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { isIPv4, isIPv6 } from "node:net";
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
  /**
   * Refuses cross-site requests (403) and adds CORS headers for allowed origins; answers a
   * preflight and returns true (then nothing else runs).
   */
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
      const allowed = origin !== undefined && origins.some((re) => re.test(origin));
      // A web page can send "simple" requests (form posts, text/plain bodies) to loopback without a
      // preflight, and the server acts on them even though the page never sees the answer: so a
      // request from a disallowed origin — or one the browser marks cross-site — is refused before
      // its body is read, whatever its method. curl, SDKs and same-origin tools send no Origin.
      if (origin !== undefined && !allowed) throw new ForbiddenError(`origin '${origin}' is not allowed`);
      if (!allowed && req.headers["sec-fetch-site"] === "cross-site") throw new ForbiddenError("cross-site requests are not allowed");
      if (origin === undefined) return false;
      res.setHeader("vary", "origin");
      const preflight = req.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined;
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
  if (allowed.has(full)) return true; // exactly as the operator wrote it (nginx upstream names too)
  const parsed = parseHost(full);
  if (!parsed) return false; // not a host[:port] at all (`a:80@evil.com`, `[::1`, spaces)
  return allowed.has(parsed.name) || isLoopbackName(parsed);
}

interface ParsedHost {
  /** The name as written (IPv6 in brackets), without a trailing dot. */
  name: string;
  kind: "ipv4" | "ipv6" | "dns";
  /** The address without brackets, for IP kinds. */
  address: string;
}

/**
 * Parses a Host header as RFC 9110 defines it: `uri-host [":" port]`, where uri-host is an
 * IP literal in brackets, an IPv4 address, or a DNS name. Undefined for anything else — in
 * particular, names made of digits and dots that are not IPv4 (`127.999.999.999`), since a
 * browser or resolver might read those another way.
 */
function parseHost(host: string): ParsedHost | undefined {
  let name = host;
  if (host.startsWith("[")) {
    const end = host.indexOf("]");
    if (end < 0) return undefined;
    name = host.slice(0, end + 1);
    let port = host.slice(end + 1);
    if (port !== "" && !port.startsWith(":")) return undefined;
    port = port.slice(1);
    const address = name.slice(1, -1);
    if (!isIPv6(address)) return undefined;
    return validPort(port) ? { name, kind: "ipv6", address } : undefined;
  }
  const colon = host.lastIndexOf(":");
  if (colon >= 0) {
    name = host.slice(0, colon);
    if (!validPort(host.slice(colon + 1))) return undefined;
  }
  name = name.replace(/\.$/, ""); // a trailing dot is the same DNS name
  if (isIPv4(name)) return { name, kind: "ipv4", address: name };
  if (/^[0-9.]+$/.test(name)) return undefined;
  if (!/^[a-z0-9_](?:[a-z0-9_-]{0,62}(?:\.[a-z0-9_-]{1,63})*)?$/.test(name)) return undefined;
  return { name, kind: "dns", address: "" };
}

function validPort(port: string): boolean {
  return port === "" || (/^[0-9]{1,5}$/.test(port) && Number(port) <= 65535);
}

/** localhost and *.localhost, 127.0.0.0/8, ::1, and IPv4-mapped 127.0.0.0/8 in any IPv6 spelling. */
function isLoopbackName(h: ParsedHost): boolean {
  if (h.kind === "dns") return h.name === "localhost" || h.name.endsWith(".localhost");
  if (h.kind === "ipv4") return h.address.startsWith("127.");
  const groups = expandIPv6(h.address);
  if (!groups) return false;
  const zeros = (n: number) => groups.slice(0, n).every((g) => g === 0);
  if (zeros(7) && groups[7] === 1) return true; // ::1
  // ::ffff:127.x.y.z (browsers write it as [::ffff:7f00:1])
  return zeros(5) && groups[5] === 0xffff && (groups[6]! >> 8) === 127;
}

/** The eight 16-bit groups of an IPv6 address (embedded IPv4 included), or undefined. */
function expandIPv6(address: string): number[] | undefined {
  let text = address;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    const parts = v4[1]!.split(".").map(Number);
    text = `${text.slice(0, v4.index)}${((parts[0]! << 8) | parts[1]!).toString(16)}:${((parts[2]! << 8) | parts[3]!).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const a = head === "" ? [] : head.split(":");
  const b = tail === undefined || tail === "" ? [] : tail.split(":");
  const fill = tail === undefined ? 0 : 8 - a.length - b.length;
  const groups = [...a, ...Array<string>(Math.max(0, fill)).fill("0"), ...b].map((g) => parseInt(g, 16));
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined;
}

/** A configured origin: exact (case-insensitive), `*` matching any run of characters, `*` alone all. */
function originPattern(entry: string): RegExp {
  if (entry === "*") return /^/;
  const body = entry.split("*").map((part) => part.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")).join(".*");
  return new RegExp(`^${body}$`, "i");
}
