/**
 * Starts a real daemon for a test: `createApp` on 127.0.0.1:0 with a fresh store in the test's
 * directory, real runner child processes, and the given models installed. Closed on teardown.
 */
import type { Test } from "tap";
import { createApp, type App } from "../../src/app.js";
import { loadConfig, type Config } from "../../src/config.js";
import { createLogger, silentLogger } from "../../src/logger.js";
import { installTestModels, type TestModel } from "./models.js";

export interface StartedDaemon {
  url: string;
  app: App;
  config: Readonly<Config>;
}

export interface DaemonOptions {
  /** SERVICE_* overrides. */
  env?: Record<string, string>;
  /** Models to install; default one tiny model named `tiny`. */
  models?: readonly TestModel[];
  /** Log to stderr at this level (debugging); default silent. */
  logLevel?: string;
}

export async function startDaemon(t: Test, options: DaemonOptions = {}): Promise<StartedDaemon> {
  const config = loadConfig({
    SERVICE_HOST: "127.0.0.1:0",
    SERVICE_MODELS: t.testdir(),
    // One inference thread: the test models are tiny, and on 2 shared cores ggml's spinning
    // barriers with 2 threads collapse whenever anything else runs (3.7 vs 210+ tokens/s measured).
    SERVICE_THREADS: "1",
    SERVICE_CONTEXT_LENGTH: "1024",
    SERVICE_GPU: "false",
    ...options.env,
  });
  const log = options.logLevel ? createLogger({ level: options.logLevel }) : silentLogger();
  const app = await createApp(config, { log, demoModel: false });
  await installTestModels(app.services.store, options.models ?? [{ name: "tiny" }]);
  const address = await app.listen();
  t.teardown(() => app.close());
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return { url: `http://${host}:${address.port}`, app, config };
}

/** POSTs JSON and returns the fetch Response. */
export function postJson(url: string, body: unknown, init: RequestInit = {}): Promise<Response> {
  return fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), ...init });
}

/** Reads an NDJSON stream line by line, calling `onLine` for each object as it arrives. */
export async function readLines(res: Response, onLine: (line: Record<string, unknown>) => void): Promise<void> {
  const decoder = new TextDecoder();
  let rest = "";
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    rest += decoder.decode(chunk, { stream: true });
    const parts = rest.split("\n");
    rest = parts.pop() ?? "";
    for (const part of parts) if (part.trim()) onLine(JSON.parse(part) as Record<string, unknown>);
  }
}

/** Reads an NDJSON response into its objects. */
export async function readNdjson(res: Response): Promise<Record<string, unknown>[]> {
  const text = await res.text();
  return text.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as Record<string, unknown>);
}
