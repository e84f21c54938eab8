/**
 * The gateway's configuration: GATEWAY_* variables read once at start with env-schema, like the
 * daemon's (src/config.ts), and checked so that a gateway that would be unsafe never starts.
 *
 * Safety rules checked here: at least one credential source (API keys or JWT) is configured, and
 * plain HTTP is used only when asked for AND the listen address is loopback; otherwise a TLS
 * certificate and key are required. Every problem is a {@link ConfigError} naming its variable.
 */
import envSchema from "env-schema";
import { ConfigError, isLoopbackHost, parseBoolean, parseListenAddress, type ListenAddress } from "../config.js";
import { parseDuration } from "../units.js";

/** Every GATEWAY_* variable with its default and meaning; packaging/lmd-gateway.env is checked against it. */
export const GATEWAY_VARIABLES = {
  GATEWAY_HOST: { default: ":11443", meaning: "listen address (same forms as SERVICE_HOST); default all interfaces, port 11443" },
  GATEWAY_UPSTREAM: { default: "http://127.0.0.1:11434", meaning: "the lmd daemon the gateway forwards to" },
  GATEWAY_API_KEYS: { default: "", meaning: "allowed X-API-Key values, comma separated (plain keys or sha256:<hex> hashes)" },
  GATEWAY_KEYS_FILE: { default: "", meaning: "file of allowed keys, one per line (plain or sha256:<hex>); re-read on SIGHUP" },
  GATEWAY_JWT_SECRET: { default: "", meaning: "HS256 secret (at least 32 characters) for bearer JWTs" },
  GATEWAY_JWKS_FILE: { default: "", meaning: "JWKS file of public keys (RS256, ES256, EdDSA) for bearer JWTs; re-read on SIGHUP" },
  GATEWAY_JWT_ISSUER: { default: "", meaning: "required `iss` claim of bearer JWTs; unset = not checked" },
  GATEWAY_JWT_AUDIENCE: { default: "", meaning: "required `aud` claim of bearer JWTs; unset = not checked" },
  GATEWAY_RATE_LIMIT: { default: "60", meaning: "requests per minute per key (token bucket, bursts up to the same number); 0 = no limit" },
  GATEWAY_MAX_CONNECTIONS: {
    default: "1024",
    meaning: "open connections at most, all clients together; one more replaces the oldest idle one, or is refused (503) while all are busy; logged",
  },
  GATEWAY_MAX_CONNECTIONS_PER_ADDRESS: {
    default: "64",
    meaning: "open connections at most from one client network (see the prefixes); one more replaces its oldest idle one, or is refused (503); logged",
  },
  GATEWAY_AUTH_FAILURE_LIMIT: {
    default: "20",
    meaning: "failed authentications per client network per minute before it gets 429 for the rest of that minute; 0 = no limit",
  },
  GATEWAY_IPV4_PREFIX: { default: "32", meaning: "an IPv4 client's network for the per-client limits: its address's first bits (32 = the address alone)" },
  GATEWAY_IPV6_PREFIX: {
    default: "64",
    meaning: "an IPv6 client's network for the per-client limits: its address's first bits (64: one host commonly holds a whole /64)",
  },
  GATEWAY_TLS_CERT: { default: "", meaning: "PEM certificate chain for HTTPS; re-read on SIGHUP" },
  GATEWAY_TLS_KEY: { default: "", meaning: "PEM private key for HTTPS; re-read on SIGHUP" },
  GATEWAY_ALLOW_PLAINTEXT: { default: "false", meaning: "serve plain HTTP without TLS; refused unless GATEWAY_HOST is loopback" },
  GATEWAY_LOG_LEVEL: { default: "info", meaning: "pino level: fatal, error, warn, info, debug, trace, silent" },
  GATEWAY_SHUTDOWN_TIMEOUT: { default: "30s", meaning: "grace period for open streams on SIGTERM" },
} as const;

export type GatewayVariable = keyof typeof GATEWAY_VARIABLES;

/** The checked, typed configuration. */
export interface GatewayConfig {
  listen: ListenAddress;
  /** Upstream origin, e.g. `http://127.0.0.1:11434` (no path). */
  upstream: string;
  /** Keys (or `sha256:` hashes) from GATEWAY_API_KEYS. */
  apiKeys: readonly string[];
  keysFile: string | undefined;
  jwtSecret: string | undefined;
  jwksFile: string | undefined;
  jwtIssuer: string | undefined;
  jwtAudience: string | undefined;
  /** Requests per minute per key; 0 = unlimited. */
  rateLimit: number;
  /** Connection caps: in all and per client address. */
  maxConnections: number;
  maxConnectionsPerAddress: number;
  /** Failed authentications per address per minute; 0 = unlimited. */
  authFailureLimit: number;
  /** The per-client limits count a client's network: these many leading bits of its address. */
  addressPrefix: { v4: number; v6: number };
  /** Both set for HTTPS, both undefined for plain HTTP. */
  tls: { certFile: string; keyFile: string } | undefined;
  logLevel: string;
  shutdownTimeoutMs: number;
}

/** The default port when GATEWAY_HOST names no port. */
export const GATEWAY_DEFAULT_PORT = 11443;

const schema = {
  type: "object",
  properties: {
    GATEWAY_HOST: { type: "string", default: GATEWAY_VARIABLES.GATEWAY_HOST.default },
    GATEWAY_UPSTREAM: { type: "string", default: GATEWAY_VARIABLES.GATEWAY_UPSTREAM.default },
    GATEWAY_API_KEYS: { type: "string", default: "" },
    GATEWAY_KEYS_FILE: { type: "string" },
    GATEWAY_JWT_SECRET: { type: "string", minLength: 32 },
    GATEWAY_JWKS_FILE: { type: "string" },
    GATEWAY_JWT_ISSUER: { type: "string" },
    GATEWAY_JWT_AUDIENCE: { type: "string" },
    GATEWAY_RATE_LIMIT: { type: "integer", minimum: 0, maximum: 1_000_000, default: 60 },
    GATEWAY_MAX_CONNECTIONS: { type: "integer", minimum: 1, maximum: 1_000_000, default: 1024 },
    GATEWAY_MAX_CONNECTIONS_PER_ADDRESS: { type: "integer", minimum: 1, maximum: 1_000_000, default: 64 },
    GATEWAY_AUTH_FAILURE_LIMIT: { type: "integer", minimum: 0, maximum: 1_000_000, default: 20 },
    GATEWAY_IPV4_PREFIX: { type: "integer", minimum: 0, maximum: 32, default: 32 },
    GATEWAY_IPV6_PREFIX: { type: "integer", minimum: 0, maximum: 128, default: 64 },
    GATEWAY_TLS_CERT: { type: "string" },
    GATEWAY_TLS_KEY: { type: "string" },
    GATEWAY_ALLOW_PLAINTEXT: { type: "boolean", default: false },
    GATEWAY_LOG_LEVEL: { type: "string", enum: ["fatal", "error", "warn", "info", "debug", "trace", "silent"], default: "info" },
    GATEWAY_SHUTDOWN_TIMEOUT: { type: "string", default: GATEWAY_VARIABLES.GATEWAY_SHUTDOWN_TIMEOUT.default },
  },
} as const;

interface RawEnv {
  GATEWAY_HOST: string;
  GATEWAY_UPSTREAM: string;
  GATEWAY_API_KEYS: string;
  GATEWAY_KEYS_FILE?: string;
  GATEWAY_JWT_SECRET?: string;
  GATEWAY_JWKS_FILE?: string;
  GATEWAY_JWT_ISSUER?: string;
  GATEWAY_JWT_AUDIENCE?: string;
  GATEWAY_RATE_LIMIT: number;
  GATEWAY_MAX_CONNECTIONS: number;
  GATEWAY_MAX_CONNECTIONS_PER_ADDRESS: number;
  GATEWAY_AUTH_FAILURE_LIMIT: number;
  GATEWAY_IPV4_PREFIX: number;
  GATEWAY_IPV6_PREFIX: number;
  GATEWAY_TLS_CERT?: string;
  GATEWAY_TLS_KEY?: string;
  GATEWAY_ALLOW_PLAINTEXT: boolean;
  GATEWAY_LOG_LEVEL: string;
  GATEWAY_SHUTDOWN_TIMEOUT: string;
}

/** Reads and checks the gateway configuration from `env` (never from `process.env` directly). */
export function loadGatewayConfig(env: Record<string, string | undefined>): Readonly<GatewayConfig> {
  const raw = readRaw(env);
  const listen = parseListenAddress(raw.GATEWAY_HOST, "GATEWAY_HOST", GATEWAY_DEFAULT_PORT);
  const apiKeys = raw.GATEWAY_API_KEYS.split(",").map((s) => s.trim()).filter((s) => s !== "");
  if (apiKeys.length === 0 && !raw.GATEWAY_KEYS_FILE && !raw.GATEWAY_JWT_SECRET && !raw.GATEWAY_JWKS_FILE) {
    throw new ConfigError("GATEWAY_API_KEYS", "no credentials configured: set GATEWAY_API_KEYS, GATEWAY_KEYS_FILE, GATEWAY_JWT_SECRET or GATEWAY_JWKS_FILE");
  }
  const shutdownTimeoutMs = parseDuration(raw.GATEWAY_SHUTDOWN_TIMEOUT);
  if (shutdownTimeoutMs === undefined || shutdownTimeoutMs < 0) {
    throw new ConfigError("GATEWAY_SHUTDOWN_TIMEOUT", `'${raw.GATEWAY_SHUTDOWN_TIMEOUT}' is not a duration (examples: 30s, 1m)`);
  }
  return Object.freeze({
    listen,
    upstream: parseUpstream(raw.GATEWAY_UPSTREAM),
    apiKeys: Object.freeze(apiKeys),
    keysFile: raw.GATEWAY_KEYS_FILE,
    jwtSecret: raw.GATEWAY_JWT_SECRET,
    jwksFile: raw.GATEWAY_JWKS_FILE,
    jwtIssuer: raw.GATEWAY_JWT_ISSUER,
    jwtAudience: raw.GATEWAY_JWT_AUDIENCE,
    rateLimit: raw.GATEWAY_RATE_LIMIT,
    maxConnections: raw.GATEWAY_MAX_CONNECTIONS,
    maxConnectionsPerAddress: raw.GATEWAY_MAX_CONNECTIONS_PER_ADDRESS,
    authFailureLimit: raw.GATEWAY_AUTH_FAILURE_LIMIT,
    addressPrefix: Object.freeze({ v4: raw.GATEWAY_IPV4_PREFIX, v6: raw.GATEWAY_IPV6_PREFIX }),
    tls: tlsFiles(raw, listen),
    logLevel: raw.GATEWAY_LOG_LEVEL,
    shutdownTimeoutMs,
  });
}

function readRaw(env: Record<string, string | undefined>): RawEnv {
  // Empty strings mean "unset", as for the daemon (an env file line `GATEWAY_TLS_CERT=` is no value).
  const data: Record<string, string> = {};
  for (const name of Object.keys(GATEWAY_VARIABLES)) {
    const value = env[name];
    if (value !== undefined && value.trim() !== "") data[name] = value.trim();
  }
  // Booleans as systemd and Ollama spell them (1/yes/on, any case); ajv alone accepts only true/false.
  const plaintext = data.GATEWAY_ALLOW_PLAINTEXT;
  if (plaintext !== undefined && parseBoolean(plaintext) !== undefined) data.GATEWAY_ALLOW_PLAINTEXT = String(parseBoolean(plaintext));
  try {
    return envSchema<RawEnv>({ schema, data, env: false, dotenv: false }); // only `env`: never process.env behind it
  } catch (err) {
    const first = (err instanceof Error ? err.message : String(err)).split(",")[0] ?? "";
    const m = /env\/(\w+) (.*)/.exec(first);
    // Never echo a value back: GATEWAY_JWT_SECRET's would end up in the journal.
    throw m ? new ConfigError(m[1] ?? "environment", m[2] ?? "is invalid") : new ConfigError("environment", first);
  }
}

/** Plain HTTP only on loopback and only when asked; anything else needs both TLS files. */
function tlsFiles(raw: RawEnv, listen: ListenAddress): GatewayConfig["tls"] {
  const cert = raw.GATEWAY_TLS_CERT;
  const key = raw.GATEWAY_TLS_KEY;
  if (cert && key) return { certFile: cert, keyFile: key };
  if (cert) throw new ConfigError("GATEWAY_TLS_KEY", "GATEWAY_TLS_CERT is set but the private key file is not");
  if (key) throw new ConfigError("GATEWAY_TLS_CERT", "GATEWAY_TLS_KEY is set but the certificate file is not");
  if (!raw.GATEWAY_ALLOW_PLAINTEXT) {
    throw new ConfigError(
      "GATEWAY_TLS_CERT",
      "a TLS certificate and key (GATEWAY_TLS_CERT, GATEWAY_TLS_KEY) are required; plain HTTP needs GATEWAY_ALLOW_PLAINTEXT=true and a loopback GATEWAY_HOST",
    );
  }
  if (!isLoopbackHost(listen.host)) {
    throw new ConfigError(
      "GATEWAY_ALLOW_PLAINTEXT",
      `plain HTTP is refused on '${listen.host || "all interfaces"}': only a loopback GATEWAY_HOST may serve without TLS (set GATEWAY_TLS_CERT and GATEWAY_TLS_KEY)`,
    );
  }
  return undefined;
}

function parseUpstream(value: string): string {
  let url: URL;
  try {
    url = new URL(value.includes("://") ? value : `http://${value}`);
  } catch {
    throw new ConfigError("GATEWAY_UPSTREAM", `'${value}' is not a URL (example: http://127.0.0.1:11434)`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new ConfigError("GATEWAY_UPSTREAM", `unsupported scheme '${url.protocol.slice(0, -1)}'`);
  if (url.pathname !== "/" || url.search || url.username) throw new ConfigError("GATEWAY_UPSTREAM", `'${value}' must be a bare origin such as http://127.0.0.1:11434`);
  return url.origin;
}
