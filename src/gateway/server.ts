/**
 * `createGateway(config, {log})`: the authenticating reverse proxy in front of the daemon.
 *
 * Each request: access-log hook → authenticate (X-API-Key, or a bearer key or JWT) → per-key rate
 * limit → forward to the daemon. Refusals are `{"error": "..."}` like every lmd error. `reload()`
 * re-reads the keys file, the JWKS file and the TLS files (SIGHUP) without touching open
 * connections; a part that fails to load keeps its previous value.
 */
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { ConfigError } from "../config.js";
import { BadRequestError, ShuttingDownError, toErrorResponse } from "../errors.js";
import { listenOn } from "../http/listen.js";
import { addressKey } from "../http/connections.js";
import { headersCheckInterval, SERVER_TIMEOUTS } from "../http/server.js";
import { clientGone, sendJson } from "../http/respond.js";
import type { Logger } from "../logger.js";
import type { GatewayConfig } from "./config.js";
import { AuthBlockedError, RateLimitedError, UnauthorizedError } from "./errors.js";
import { answerClientErrors, AuthFailureLimiter, capGatewayConnections, originForm } from "./limits.js";
import { JwtVerifier, TokenError } from "./jwt.js";
import { KeySet } from "./keys.js";
import { createUpstreamAgent, forward } from "./proxy.js";
import { RateLimiter } from "./rate-limit.js";
import { readTlsFiles } from "./tls.js";

/** A gateway, built but not yet listening. */
export interface Gateway {
  server: http.Server;
  /** Listens where the configuration says; resolves with the bound address. */
  listen(): Promise<AddressInfo>;
  /** Re-reads keys, JWKS and TLS files; never throws (failures are logged, old values kept). */
  reload(): Promise<void>;
  /** Stops accepting, lets open streams finish within the shutdown timeout, then closes the rest. */
  close(): Promise<void>;
}

/** Builds the gateway; the first load of keys, JWKS and TLS files throws a {@link ConfigError}. */
export async function createGateway(config: Readonly<GatewayConfig>, deps: { log: Logger }): Promise<Gateway> {
  const { log } = deps;
  const keys = new KeySet();
  const jwt = new JwtVerifier({ secret: config.jwtSecret, jwksFile: config.jwksFile, issuer: config.jwtIssuer, audience: config.jwtAudience });
  const limiter = new RateLimiter(config.rateLimit);
  const authFailures = new AuthFailureLimiter(config.authFailureLimit);
  const agent = createUpstreamAgent();
  await asConfigError(config.keysFile ? "GATEWAY_KEYS_FILE" : "GATEWAY_API_KEYS", () => keys.load(config.apiKeys, config.keysFile));
  await asConfigError("GATEWAY_JWKS_FILE", () => jwt.load());
  const tlsOptions = config.tls ? await readTlsFiles(config.tls) : undefined;
  if (keys.size === 0 && !jwt.enabled) log.warn("no API keys are allowed yet: every request will get 401 until the keys file lists one");

  let draining = false;
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch((err: unknown) => {
      log.error({ err }, "failed to answer a request");
      res.destroy();
    });
  };
  // Node looks for late request heads every connectionsCheckingInterval (30 s by default).
  const options = { requireHostHeader: false, noDelay: true, connectionsCheckingInterval: headersCheckInterval(SERVER_TIMEOUTS.headersTimeoutMs) };
  const server: http.Server = tlsOptions ? https.createServer({ ...options, ...tlsOptions }, handler) : http.createServer(options, handler);
  server.headersTimeout = SERVER_TIMEOUTS.headersTimeoutMs;
  server.requestTimeout = SERVER_TIMEOUTS.requestTimeoutMs;
  server.keepAliveTimeout = SERVER_TIMEOUTS.keepAliveTimeoutMs;
  capGatewayConnections(
    server,
    {
      total: config.maxConnections,
      perAddress: config.maxConnectionsPerAddress,
      prefix: config.addressPrefix,
      firstRequestMs: SERVER_TIMEOUTS.headersTimeoutMs,
    },
    log,
    tlsOptions !== undefined,
  );
  answerClientErrors(server, log);
  server.on("tlsClientError", (err: Error) => log.debug({ err: err.message }, "TLS handshake failed"));
  const sweeper = setInterval(() => {
    limiter.sweep();
    authFailures.sweep();
  }, 60_000).unref();

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const access = accessLog(log, req, res);
    const signal = clientGone(req, res);
    try {
      if (draining) throw new ShuttingDownError();
      // A CORS preflight cannot carry credentials (browsers never send them on OPTIONS); the
      // daemon answers it without doing any work, so it passes unauthenticated.
      // Only origin-form goes upstream: an absolute-form target (`GET http://host/p`) keeps its path.
      const target = originForm(req.url ?? "/");
      if (target === undefined) throw new BadRequestError("the request target must be a path (origin-form) or an http(s) URL");
      req.url = target;
      if (!isPreflight(req)) {
        // Failed authentications count per client network, not per address (an IPv6 /64 is one host).
        const address = addressKey(req.socket.remoteAddress ?? "-", config.addressPrefix);
        const wait = authFailures.blockedFor(address);
        if (wait > 0) throw new AuthBlockedError(config.authFailureLimit, wait);
        try {
          access.keyId = await authenticate(req);
        } catch (err) {
          if (err instanceof UnauthorizedError && authFailures.fail(address))
            log.warn({ remote: address, limit: config.authFailureLimit }, "too many failed authentications; address blocked");
          throw err;
        }
        const decision = limiter.take(access.keyId);
        if (!decision.allowed) throw new RateLimitedError(config.rateLimit, decision.retryAfterSeconds);
      }
      await forward(agent, config.upstream, req, res, { remote: req.socket.remoteAddress, proto: tlsOptions ? "https" : "http" }, signal);
    } catch (err) {
      const { status, body, headers } = toErrorResponse(err);
      if (status >= 500) log.warn({ err, status }, "upstream request failed");
      else log.debug({ status, error: body.error }, "request refused");
      if (res.headersSent || res.destroyed) return void res.destroy();
      // An unread body would otherwise be drained to keep the connection alive: close instead.
      sendJson(res, status, body, { ...headers, ...(req.complete ? {} : { connection: "close" }) });
    }
  }

  /** The caller's id (key fingerprint or `jwt:<sub>`), or throws 401. */
  async function authenticate(req: IncomingMessage): Promise<string> {
    const apiKey = req.headers["x-api-key"];
    if (typeof apiKey === "string" && apiKey !== "") {
      const id = keys.match(apiKey);
      if (id === undefined) throw new UnauthorizedError("invalid API key");
      return id;
    }
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? "")?.[1];
    if (bearer !== undefined) {
      // OpenAI-style clients send their key as a bearer token: accept an allowed key there too.
      const id = keys.match(bearer);
      if (id !== undefined) return id;
      if (!jwt.enabled) throw new UnauthorizedError("invalid API key");
      try {
        return await jwt.verify(bearer);
      } catch (err) {
        throw new UnauthorizedError(err instanceof TokenError ? err.message : "invalid bearer token");
      }
    }
    throw new UnauthorizedError(
      jwt.enabled ? "missing credentials: send an X-API-Key header or an Authorization: Bearer token" : "missing API key: send it in the X-API-Key header",
    );
  }

  async function reload(): Promise<void> {
    const parts: [string, () => Promise<unknown>][] = [
      ["keys", () => keys.load(config.apiKeys, config.keysFile)],
      ["jwks", () => jwt.load()],
    ];
    if (config.tls) parts.push(["tls", async () => server instanceof https.Server && server.setSecureContext(await readTlsFiles(config.tls!))]);
    const results = await Promise.allSettled(parts.map(([, load]) => load()));
    results.forEach((r, i) => {
      if (r.status === "rejected") log.error({ part: parts[i]?.[0], err: errorText(r.reason) }, "reload failed; keeping the previous value");
    });
    log.info({ keys: keys.size, ok: results.every((r) => r.status === "fulfilled") }, "gateway reloaded");
  }

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      draining = true;
      clearInterval(sweeper);
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const timer = setTimeout(() => server.closeAllConnections(), config.shutdownTimeoutMs);
      await stopped;
      clearTimeout(timer);
      await agent.close();
    })());

  return {
    server,
    reload,
    close,
    listen: () => listenOn(server, config.listen),
  };
}

/** What the access-log line learns while the request is handled. */
interface AccessInfo {
  keyId: string | undefined;
}

/**
 * One pino line per request when its response finishes or closes: caller address, key id, time
 * (pino's `time`), request line, status, bytes sent, duration. Never a header: the key and the
 * Authorization header cannot reach the log. The query string is left out (it may hold secrets).
 */
function accessLog(log: Logger, req: IncomingMessage, res: ServerResponse): AccessInfo {
  const started = performance.now();
  const socket = req.socket;
  const before = socket.bytesWritten;
  const info: AccessInfo = { keyId: undefined };
  res.once("close", () => {
    const path = (req.url ?? "/").split("?")[0];
    const forwardedFor = req.headers["x-forwarded-for"];
    const line = {
      remote: socket.remoteAddress,
      // As a proxy in front of the gateway reports it (client-supplied when there is none).
      ...(typeof forwardedFor === "string" ? { forwardedFor: forwardedFor.slice(0, 200) } : {}),
      keyId: info.keyId ?? "-",
      request: `${req.method ?? ""} ${path} HTTP/${req.httpVersion}`,
      status: res.statusCode,
      bytes: socket.bytesWritten - before,
      durationMs: Math.round((performance.now() - started) * 10) / 10,
      ...(res.writableFinished ? {} : { aborted: true }),
    };
    log.info(line, "request");
  });
  return info;
}

function isPreflight(req: IncomingMessage): boolean {
  return req.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined && req.headers.origin !== undefined;
}

async function asConfigError<T>(variable: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (err) {
    throw new ConfigError(variable, errorText(err));
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
