/**
 * Helpers shared by the model-management routes: the `model`/`name` alias, the "model must be
 * idle" rule of delete and overwrites (409), and the progress responder of pull/push/create.
 */
import type { ServerResponse } from "node:http";
import type { ProgressResponse } from "../api/model-types.js";
import { BadRequestError, ModelBusyError } from "../errors.js";
import { NdjsonStream, sendJson } from "../http/respond.js";
import { displayName, nameKey, parseModelName } from "../store/names.js";
import type { Scheduler } from "../scheduler/scheduler.js";

/** `model`, or its alias `name`; 400 `model is required` when neither is a non-empty string. */
export function modelField(body: { model?: string; name?: string }): string {
  const value = body.model || body.name;
  if (!value) throw new BadRequestError("model is required");
  return value;
}

/** Refuses (409) when requests use or wait for the model. */
export function assertIdle(scheduler: Scheduler, input: string): void {
  const name = parseModelName(input);
  if (scheduler.inUse(nameKey(name))) throw new ModelBusyError(displayName(name));
}

/** Unloads the model if it is loaded and idle (after its manifest changed). */
export async function unloadIfIdle(scheduler: Scheduler, input: string): Promise<void> {
  const key = nameKey(parseModelName(input));
  if (!scheduler.inUse(key)) await scheduler.unload(key);
}

/**
 * Refuses (409) when requests use or wait for the model; otherwise unloads it if it is loaded,
 * so that the next request loads what the store now holds.
 */
export async function requireIdle(scheduler: Scheduler, input: string): Promise<void> {
  const name = parseModelName(input);
  const key = nameKey(name);
  if (scheduler.inUse(key)) throw new ModelBusyError(displayName(name));
  await scheduler.unload(key);
}

/**
 * Progress of a long operation: NDJSON lines when streaming, otherwise nothing until the final
 * object. An error thrown before the first line keeps its real status (server.ts answers it);
 * after that it becomes the stream's last line.
 */
export class Progress {
  private readonly stream: NdjsonStream | undefined;

  constructor(private readonly res: ServerResponse, streaming: boolean) {
    this.stream = streaming ? new NdjsonStream(res) : undefined;
  }

  /** Sends one progress line (streaming only); waits while the client reads slowly. */
  send(p: ProgressResponse): Promise<void> {
    return this.stream ? this.stream.write(p) : Promise.resolve();
  }

  /** Ends with `{"status":"success"}` (or `final`). */
  done(final: ProgressResponse = { status: "success" }): void {
    if (this.stream) this.stream.end(final);
    else sendJson(this.res, 200, final);
  }
}
