/**
 * The gateway's own refusals. The daemon has no authentication and never answers 401 or 429; only
 * the gateway does, so these classes live here rather than in src/errors.ts.
 */
import { HttpError } from "../errors.js";

/** 401: no credential, or one that is not allowed. Carries `WWW-Authenticate` as RFC 9110 asks. */
export class UnauthorizedError extends HttpError {
  constructor(message: string) {
    super(401, message, { headers: { "www-authenticate": 'Bearer realm="lmd"' } });
  }
}

/** 429: the key's rate limit is used up; `Retry-After` says when the next request may go. */
export class RateLimitedError extends HttpError {
  constructor(perMinute: number, retryAfterSeconds: number) {
    super(429, `rate limit exceeded: at most ${perMinute} requests per minute per key`, { headers: { "retry-after": String(retryAfterSeconds) } });
  }
}

/** 429: too many failed authentications from one address; `Retry-After` says when it may try again. */
export class AuthBlockedError extends HttpError {
  constructor(perMinute: number, retryAfterSeconds: number) {
    super(429, `too many failed authentications: at most ${perMinute} per minute per address`, { headers: { "retry-after": String(retryAfterSeconds) } });
  }
}

/** 502: the daemon could not be reached or broke off before answering. */
export class BadGatewayError extends HttpError {
  constructor(cause: unknown) {
    super(502, "the lmd service is not reachable through the gateway", { cause });
  }
}
