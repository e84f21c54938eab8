/**
 * `POST /api/pull` (CONTRACT §4): fetch a model from an Ollama-protocol registry into the store.
 *
 * Progress NDJSON: `pulling manifest`, `pulling <digest prefix>` with `digest`/`total`/`completed`
 * per layer, `verifying sha256 digest`, `writing manifest`, `success`. With `stream:false` one
 * final object, or the error with its status. The manifest is fetched before the first line, so a
 * model the registry does not know (404), an invalid manifest or an unreachable registry keep
 * their real status; later failures are the stream's last line. Blobs are resumable across pulls
 * (see registry-download.ts); the manifest is written only after every blob is verified.
 */
import type { PullRequest } from "../api/model-types.js";
import { pullSchema } from "../api/model-schemas.js";
import { readJson } from "../http/body.js";
import type { RequestContext, Router } from "../http/router.js";
import { compileValidator } from "../http/validate.js";
import { registryRef } from "../models/reference.js";
import { downloadBlob, finishBlob } from "../models/registry-download.js";
import { RegistryClient } from "../models/registry.js";
import { commitManifest, manifestDigests } from "../models/store-admin.js";
import type { Layer } from "../models/store.js";
import { assertIdle, modelField, Progress, unloadIfIdle } from "./model-common.js";
import type { Services } from "./services.js";

const validate = compileValidator<PullRequest>(pullSchema);

/** Least time between two progress lines of one layer. */
const PROGRESS_INTERVAL_MS = 200;

export function pullRoutes(router: Router, services: Services): void {
  router.add("POST", "/api/pull", (ctx) => pull(ctx, services));
}

async function pull(ctx: RequestContext, { store, scheduler }: Services): Promise<void> {
  const body = validate(await readJson(ctx.req, ctx.maxBodyBytes));
  const input = modelField(body);
  const ref = registryRef(input, body.insecure === true);
  assertIdle(scheduler, input);
  const client = new RegistryClient(ref);
  try {
    const manifest = await client.fetchManifest(ctx.signal);
    const unpin = store.pin(manifestDigests(manifest));
    try {
      const progress = new Progress(ctx.res, body.stream !== false);
      await progress.send({ status: "pulling manifest" });
      const layers = unique([...manifest.layers, manifest.config]);
      for (const layer of layers) {
        const status = `pulling ${layer.digest.slice(7, 19)}`;
        let last = 0;
        await downloadBlob(client, store, ref, layer, (completed) => {
          if (Date.now() - last < PROGRESS_INTERVAL_MS) return;
          last = Date.now();
          void progress.send({ status, digest: layer.digest, total: layer.size, completed });
        }, ctx.signal);
        await progress.send({ status, digest: layer.digest, total: layer.size, completed: layer.size });
      }
      await progress.send({ status: "verifying sha256 digest" });
      for (const layer of layers) await finishBlob(store, layer);
      await progress.send({ status: "writing manifest" });
      await commitManifest(store, input, manifest);
      await unloadIfIdle(scheduler, input); // a loaded copy of the old version must not keep serving
      progress.done();
    } finally {
      unpin();
    }
  } finally {
    await client.close();
  }
}

function unique(layers: Layer[]): Layer[] {
  const seen = new Set<string>();
  return layers.filter((l) => !seen.has(l.digest) && seen.add(l.digest));
}
