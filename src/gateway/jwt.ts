/**
 * Bearer JWT verification with `jose`: HS256 with a shared secret (GATEWAY_JWT_SECRET) and
 * asymmetric algorithms with public keys from a local JWKS file (GATEWAY_JWKS_FILE).
 *
 * Each key source accepts only its own algorithms, so a token signed with HS256 using a public key
 * as the "secret" (the classic algorithm-confusion attack) never verifies. Tokens must carry
 * `exp`; `iss` and `aud` are checked when configured.
 */
import { readFile } from "node:fs/promises";
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet, type JWTPayload, type JWTVerifyGetKey } from "jose";

/** Algorithms accepted with the shared secret. */
export const SECRET_ALGORITHMS = ["HS256"] as const;
/** Algorithms accepted with keys from the JWKS file. */
export const JWKS_ALGORITHMS = ["RS256", "ES256", "EdDSA"] as const;

export interface JwtOptions {
  secret: string | undefined;
  jwksFile: string | undefined;
  issuer: string | undefined;
  audience: string | undefined;
}

/** Why a token was refused; the message is client-safe and goes into the 401 body. */
export class TokenError extends Error {}

/** Verifies bearer tokens; `load()` (re)reads the JWKS file. */
export class JwtVerifier {
  private jwks: JWTVerifyGetKey | undefined;
  private readonly secret: Uint8Array | undefined;

  constructor(private readonly options: JwtOptions) {
    this.secret = options.secret ? new TextEncoder().encode(options.secret) : undefined;
  }

  /** True when any JWT key source is configured. */
  get enabled(): boolean {
    return this.secret !== undefined || this.options.jwksFile !== undefined;
  }

  /** Reads the JWKS file (if configured); throws without changing anything on error. */
  async load(): Promise<void> {
    if (!this.options.jwksFile) return;
    const parsed = JSON.parse(await readFile(this.options.jwksFile, "utf8")) as JSONWebKeySet;
    if (!Array.isArray(parsed.keys)) throw new Error(`${this.options.jwksFile}: not a JWKS (no "keys" array)`);
    this.jwks = createLocalJWKSet(parsed);
  }

  /** Verifies `token`; resolves with the caller's id for logs and rate limits (`jwt:<sub>`). */
  async verify(token: string): Promise<string> {
    let alg: string | undefined;
    try {
      alg = decodeProtectedHeader(token).alg;
    } catch {
      throw new TokenError("invalid bearer token: malformed JWT");
    }
    const common = { issuer: this.options.issuer, audience: this.options.audience, requiredClaims: ["exp"], clockTolerance: 30 };
    let payload: JWTPayload;
    try {
      if (alg !== undefined && (SECRET_ALGORITHMS as readonly string[]).includes(alg) && this.secret) {
        ({ payload } = await jwtVerify(token, this.secret, { ...common, algorithms: [...SECRET_ALGORITHMS] }));
      } else if (alg !== undefined && (JWKS_ALGORITHMS as readonly string[]).includes(alg) && this.jwks) {
        ({ payload } = await jwtVerify(token, this.jwks, { ...common, algorithms: [...JWKS_ALGORITHMS] }));
      } else {
        throw new TokenError(`invalid bearer token: algorithm '${String(alg)}' is not accepted`);
      }
    } catch (err) {
      if (err instanceof TokenError) throw err;
      throw new TokenError(`invalid bearer token: ${reason(err)}`);
    }
    const sub = typeof payload.sub === "string" && payload.sub !== "" ? payload.sub.slice(0, 64) : "anonymous";
    return `jwt:${sub}`;
  }
}

/** jose's error codes in words a client can act on (never echoing the token). */
function reason(err: unknown): string {
  const code = (err as { code?: string } | null)?.code;
  const claim = (err as { claim?: string } | null)?.claim;
  switch (code) {
    case "ERR_JWT_EXPIRED":
      return "token has expired";
    case "ERR_JWS_SIGNATURE_VERIFICATION_FAILED":
      return "signature verification failed";
    case "ERR_JWKS_NO_MATCHING_KEY":
      return "no matching key";
    case "ERR_JWT_CLAIM_VALIDATION_FAILED":
      return `claim '${claim ?? "?"}' check failed`;
    case "ERR_JOSE_ALG_NOT_ALLOWED":
      return "algorithm not accepted";
    default:
      return "malformed JWT";
  }
}
