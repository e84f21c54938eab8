/**
 * The error classes of the API: HTTP errors carrying their status, and the model store's
 * errors ({@link StoreError}), which carry a kind instead, so that the store knows nothing of HTTP.
 *
 * Handlers throw these; one place (`http/server.ts`) turns any thrown value into a status and
 * `{"error": "..."}` with {@link toErrorResponse}, the only place a store error's kind becomes a
 * status. Anything else becomes a 500 whose detail goes to the log only. This file is a leaf: it
 * imports nothing from the rest of lmd.
 */

/** Base class: an error with the status it maps to and the message the client sees. */
export class HttpError extends Error {
  readonly status: number;
  /** Extra response headers (for example `Allow` on 405, `Retry-After` on 503). */
  readonly headers: Record<string, string>;

  constructor(status: number, message: string, options?: { cause?: unknown; headers?: Record<string, string> }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.status = status;
    this.headers = options?.headers ?? {};
  }
}

/** 400: anything wrong with the request itself. */
export class BadRequestError extends HttpError {
  constructor(message: string) {
    super(400, message);
  }
}

/** 403: Host header or CORS origin refused by the DNS-rebinding guards. */
export class ForbiddenError extends HttpError {
  constructor(message: string) {
    super(403, message);
  }
}

/** 404: an unknown path, or any other missing resource with its own message. */
export class NotFoundError extends HttpError {
  constructor(message: string) {
    super(404, message);
  }
}

/** 405: a known path with a method it does not serve. */
export class MethodNotAllowedError extends HttpError {
  constructor(method: string, path: string, allow: readonly string[]) {
    super(405, `method ${method} not allowed on ${path}`, { headers: { allow: allow.join(", ") } });
  }
}

/** 409: the operation needs the model idle. */
export class ModelBusyError extends HttpError {
  constructor(name: string) {
    super(409, `model '${name}' is currently in use`);
  }
}

/** 413: the JSON body is over `SERVICE_MAX_BODY`. */
export class BodyTooLargeError extends HttpError {
  constructor(limit: number) {
    super(413, `request body too large (limit ${limit} bytes)`);
  }
}

/** The contract's message for a model that cannot be loaded. */
function loadFailure(name: string, reason: string): string {
  return `failed to load model '${name}': ${reason}`;
}

/** 500: the model could not be loaded. `reason` is client-safe (no paths, no stacks). */
export class ModelLoadError extends HttpError {
  constructor(name: string, reason: string, cause?: unknown) {
    super(500, loadFailure(name, reason), { cause });
  }
}

/** 500: generation failed or the runner died. `detail` is client-safe. */
export class ModelRunError extends HttpError {
  constructor(detail: string, cause?: unknown) {
    super(500, `an error occurred while running the model: ${detail}`, { cause });
  }
}

/** 503: queue full, or the daemon is shutting down. Always carries `Retry-After`. */
export class ServiceBusyError extends HttpError {
  constructor(message = "server busy, please try again: maximum pending requests exceeded", retryAfterSeconds = 1) {
    super(503, message, { headers: { "retry-after": String(retryAfterSeconds) } });
  }
}

/** 503 from `/readyz`: not ready is the answer, not a failure. */
export class NotReadyError extends ServiceBusyError {
  constructor(message: string) {
    super(message);
  }
}

/** 503 while draining on SIGTERM. */
export class ShuttingDownError extends ServiceBusyError {
  constructor() {
    super("server is shutting down", 5);
  }
}

/** 507: the disk filled while writing a blob or manifest. */
export class NoSpaceError extends HttpError {
  constructor(cause?: unknown) {
    super(507, "no space left on device", { cause });
  }
}

/**
 * What a {@link StoreError} is about: a name, digest or path the caller got wrong (`invalid`), a model
 * that is not there, a stored model that cannot be used (`broken`), a store the daemon may not write,
 * uploads over their quota. The door gives each kind its status ({@link STORE_STATUS}).
 */
export type StoreErrorKind = "invalid" | "not-found" | "broken" | "not-writable" | "quota";

/**
 * A failure of the model store, in the contract's words but without HTTP: the store says what went
 * wrong, the door ({@link toErrorResponse}) which status tells the client.
 */
export class StoreError extends Error {
  readonly kind: StoreErrorKind;

  constructor(kind: StoreErrorKind, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.kind = kind;
  }
}

/** The status of each kind of store error (a full quota is Ollama's 507, like a full disk). */
const STORE_STATUS: Readonly<Record<StoreErrorKind, number>> = { invalid: 400, "not-found": 404, broken: 500, "not-writable": 500, quota: 507 };

/**
 * A model that is not in the store (404). `pullHint: false` where pulling is no remedy (a delete:
 * there is nothing to remove), as Ollama's delete answers.
 */
export class ModelNotFoundError extends StoreError {
  constructor(name: string, pullHint = true) {
    super("not-found", pullHint ? `model '${name}' not found, try pulling it first` : `model '${name}' not found`);
  }
}

/** A stored model whose layers cannot be used (500, the message of {@link ModelLoadError}). */
export class BrokenModelError extends StoreError {
  constructor(name: string, reason: string, cause?: unknown) {
    super("broken", loadFailure(name, reason), { cause });
  }
}

/**
 * The store refused a write (500) — a store owned by another user, a read-only mount
 * (systemd's ProtectSystem=strict without ReadWritePaths=), an immutable directory. The status is
 * Ollama's for the same failure; the reason is the system's, without the path.
 */
export class StoreNotWritableError extends StoreError {
  constructor(reason: string, cause?: unknown) {
    super("not-writable", `model store is not writable: ${reason}`, { cause });
  }
}

/** The reasons a write is refused, as the system's messages word them. */
const NOT_WRITABLE: Readonly<Record<string, string>> = {
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EROFS: "read-only file system",
};

/** The reason for an error code that refuses a write (EACCES, EPERM, EROFS), else undefined. */
export function refusedWriteReason(code: string | undefined): string | undefined {
  return NOT_WRITABLE[code ?? ""];
}

/** File system calls that only change things: their refusal means the target is not writable. */
const WRITE_CALLS = new Set([
  "mkdir",
  "rename",
  "unlink",
  "rmdir",
  "rm",
  "link",
  "symlink",
  "copyfile",
  "write",
  "ftruncate",
  "utime",
  "futime",
  "chmod",
  "fchmod",
]);

/**
 * A refused write (EROFS from any call; EACCES or EPERM from a call that changes the file system)
 * as a {@link StoreNotWritableError}, else undefined. The daemon writes no files but the store's
 * while serving requests, so such an error is the store's.
 */
export function notWritable(err: unknown): StoreNotWritableError | undefined {
  const e = err as NodeJS.ErrnoException | null;
  const reason = NOT_WRITABLE[e?.code ?? ""];
  if (reason === undefined || !(e?.code === "EROFS" || WRITE_CALLS.has(e?.syscall ?? ""))) return undefined;
  return new StoreNotWritableError(reason, err);
}

/** The one error body shape of the contract. */
export interface ErrorBody {
  error: string;
}

/** Generic 500 message for failures whose detail must stay in the log. */
export const INTERNAL_ERROR_MESSAGE = "an internal error occurred";

/**
 * Maps any thrown value to the status, body and headers the client receives.
 * Unknown errors become a 500 with a generic message: their detail belongs in the log.
 */
export function toErrorResponse(err: unknown): { status: number; body: ErrorBody; headers: Record<string, string> } {
  if (err instanceof HttpError) return { status: err.status, body: { error: err.message }, headers: err.headers };
  if (err instanceof StoreError) return { status: STORE_STATUS[err.kind], body: { error: err.message }, headers: {} };
  if (isNoSpace(err)) return toErrorResponse(new NoSpaceError(err));
  const refused = notWritable(err);
  if (refused) return toErrorResponse(refused);
  return { status: 500, body: { error: INTERNAL_ERROR_MESSAGE }, headers: {} };
}

/** True for ENOSPC (and EDQUOT, which users meet the same way). */
export function isNoSpace(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return code === "ENOSPC" || code === "EDQUOT";
}
