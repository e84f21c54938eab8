/**
 * Forwarding one request to the daemon with undici, and its response back to the client.
 *
 * - Credentials stop here: `X-API-Key` and `Authorization` are never sent upstream.
 * - `X-Forwarded-For` gets the caller's address appended; `X-Forwarded-Proto`/`-Host` say how the
 *   gateway was reached. `Host` is the upstream's own, so a daemon bound to loopback accepts it.
 * - Bodies stream both ways through `pipeline`, so a slow reader holds back the daemon (through
 *   TCP flow control) instead of filling the gateway's memory.
 * - When the client goes away, `signal` aborts the upstream request; the daemon sees its socket
 *   close and cancels the generation, freeing the slot.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { pipeline } from "node:stream/promises";
import { Agent, type Dispatcher } from "undici";
import { BadGatewayError } from "./errors.js";

/** Request headers never forwarded: hop-by-hop (RFC 9110 §7.6.1), credentials, and Host. */
const DROP_REQUEST = new Set([
  "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te", "trailer",
  "transfer-encoding", "upgrade", "expect", "host", "x-api-key", "authorization",
]);

/** Response headers not copied back (hop-by-hop; Node frames the response itself). */
const DROP_RESPONSE = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"]);

/** An agent for the upstream: no header or body timeouts, because a model load or a long
 * prompt may take minutes before the first byte; the daemon has its own load timeout, and a
 * client that gives up cancels through `signal`. */
export function createUpstreamAgent(): Agent {
  return new Agent({ headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: 4_000 });
}

/** Where the request came from, for the X-Forwarded-* headers. */
export interface ForwardInfo {
  remote: string | undefined;
  proto: "http" | "https";
}

/**
 * Forwards `req` to `upstream` and streams the answer into `res`. Throws {@link BadGatewayError}
 * when the daemon cannot be reached before the response starts; after that, a broken stream just
 * ends the client's connection (its status is already sent).
 */
export async function forward(
  agent: Dispatcher,
  upstream: string,
  req: IncomingMessage,
  res: ServerResponse,
  info: ForwardInfo,
  signal: AbortSignal,
): Promise<void> {
  let answer: Dispatcher.ResponseData;
  try {
    answer = await agent.request({
      origin: upstream,
      path: req.url ?? "/",
      method: (req.method ?? "GET") as Dispatcher.HttpMethod,
      headers: requestHeaders(req.headers, info),
      body: hasBody(req) ? req : null,
      signal,
    });
  } catch (err) {
    if (signal.aborted) return; // the client left while the daemon was still loading: nothing to answer
    throw new BadGatewayError(err);
  }
  res.writeHead(answer.statusCode, responseHeaders(answer.headers));
  try {
    await pipeline(answer.body, res);
  } catch (err) {
    // The client went away (pipeline destroyed the upstream body, which aborts the request) or
    // the daemon broke off mid-stream (pipeline destroyed `res`): either way nothing more to send.
    if (!signal.aborted) throw err;
  }
}

/** True when the request carries a body to stream upstream. */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers["content-length"];
  return req.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}

/** The headers sent upstream. */
export function requestHeaders(incoming: IncomingHttpHeaders, info: ForwardInfo): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  const listed = connectionListed(incoming.connection);
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || DROP_REQUEST.has(name) || listed.has(name)) continue;
    out[name] = value;
  }
  const prior = incoming["x-forwarded-for"];
  const chain = [typeof prior === "string" ? prior : prior?.join(", "), info.remote].filter((s) => s !== undefined && s !== "");
  if (chain.length > 0) out["x-forwarded-for"] = chain.join(", ");
  out["x-forwarded-proto"] = info.proto;
  if (incoming.host !== undefined) out["x-forwarded-host"] = incoming.host;
  return out;
}

/** The daemon's headers, less the hop-by-hop ones. */
function responseHeaders(incoming: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  const listed = connectionListed(incoming.connection);
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || DROP_RESPONSE.has(name) || listed.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/** Header names listed in `Connection` are hop-by-hop too. */
function connectionListed(value: string | string[] | undefined): Set<string> {
  const text = Array.isArray(value) ? value.join(",") : value ?? "";
  return new Set(text.split(",").map((s) => s.trim().toLowerCase()).filter((s) => s !== ""));
}
