/**
 * The registry client's error class and its bounds (retries, timeouts, sizes): a leaf that every
 * registry module may import.
 */
import { HttpError } from "../errors.js";

/** A registry failure, shown to the client (status 500 unless the registry said otherwise). */
export class RegistryError extends HttpError {
  constructor(message: string, status = 500) {
    super(status, message);
  }
}

/** Retry and transfer settings; tests may lower them. */
export const REGISTRY_DEFAULTS = {
  maxRetries: 4,
  minTimeoutMs: 500,
  maxTimeoutMs: 10_000,
  /** Blobs larger than this are downloaded as parallel ranges of about this size. */
  partSize: 64 * 1024 * 1024,
  /** Ranges in flight at once. */
  parallel: 4,
  /** No connection within this long: the registry is unreachable (not retried). */
  connectTimeoutMs: 10_000,
  /** No response head this long after the request: the registry is broken (not retried). */
  headersTimeoutMs: 30_000,
  /** The whole manifest body must arrive within this long. */
  manifestTimeoutMs: 30_000,
  /** No blob bytes for this long: the download stalled (retried, resuming with Range). Ollama's stall time. */
  bodyTimeoutMs: 30_000,
  /** A blob response whose bytes wait this long to be written is dropped and asked for again (download.ts). */
  maxBufferedBytes: 16 * 1024 * 1024,
  maxManifestBytes: 4 * 1024 * 1024,
  maxLayers: 1024,
};
