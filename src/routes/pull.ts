/**
 * `POST /api/pull`: fetch a model from an Ollama-protocol registry into the store.
 *
 * Progress NDJSON: `pulling manifest`, `pulling <digest prefix>` with `digest`/`total`/`completed`
 * per layer, `verifying sha256 digest`, `writing manifest`, `success`. With `stream:false` one
 * final object, or the error with its status (404 for a model the registry does not know). When
 * streaming, `pulling manifest` is sent before the registry is asked, and every registry failure
 * is the stream's last line, as in Ollama. Blobs are resumable across pulls, and pulls needing the
 * same blob at the same time share its download (registry/download.ts); the manifest is written
 * only after every blob is verified and stored. With mirrors configured for the registry
 * (registry/mirror.ts), the manifest and each blob are asked of the mirror first and of the next
 * source (at last the registry) when it fails.
 */
import type { PullRequest } from "../api/model-types.js";
import { pullSchema } from "../api/model-schemas.js";
import { readJson } from "../http/body.js";
import type { RequestContext, Router } from "../http/router.js";
import { compileValidator } from "../http/validate.js";
import { registryRef, type RegistryRef } from "../registry/reference.js";
import { BlobLeases } from "../registry/download.js";
import { openClient } from "../registry/client.js";
import { PullSources, pullSources } from "../registry/mirror.js";
import { commitManifest, manifestDigests, removeUnreferenced } from "../store/admin.js";
import { withNames } from "../store/locks.js";
import type { Layer } from "../store/store.js";
import { assertIdle, modelField, Progress, unloadIfIdle } from "./model-common.js";
import type { Services } from "../chat/services.js";

const validate = compileValidator<PullRequest>(pullSchema, { asGo: true });

/** Least time between two progress lines of one layer. */
const PROGRESS_INTERVAL_MS = 200;

export function pullRoutes(router: Router, services: Services): void {
  router.add("POST", "/api/pull", (ctx) => pull(ctx, services));
}

async function pull(ctx: RequestContext, services: Services): Promise<void> {
  const body = validate(await readJson(ctx.req, ctx.maxBodyBytes));
  const input = modelField(body);
  const ref = registryRef(input, body.insecure === true);
  assertIdle(services.scheduler, input);
  await services.store.requireWritable(); // a real status, before the stream starts
  // The first line goes out before the registry is asked, as Ollama does: a client sees at once
  // that the pull started, and a registry failure is the stream's last line (status 200 already
  // sent, so the CLI does not retry what retrying cannot fix). Without streaming, the real status.
  const progress = new Progress(ctx.res, body.stream !== false);
  await pullModel(services, input, ref, progress, ctx);
  progress.done();
}

/**
 * Pulls `input` from `ref` into the store, its steps told on `progress` (from `pulling manifest`
 * to `writing manifest`; the caller ends it). Also the first step of a create whose base model is
 * not in the store (routes/create.ts).
 */
export async function pullModel(
  { store, scheduler, config }: Pick<Services, "store" | "scheduler" | "config">,
  input: string,
  ref: RegistryRef,
  progress: Progress,
  ctx: Pick<RequestContext, "log" | "signal">,
): Promise<void> {
  const sources = new PullSources(pullSources(ref, config.registry.mirrors), (r) => openClient(r, config.registry), ctx.log, ctx.signal);
  await progress.send({ status: "pulling manifest" });
  const leases = new BlobLeases();
  let committed = false;
  let unpin = () => {};
  try {
    const manifest = await sources.attempt(async (client) => client.fetchManifest(ctx.signal));
    unpin = store.pin(manifestDigests(manifest));
    const layers = unique([...manifest.layers, manifest.config]);
    for (const layer of layers) {
      const status = `pulling ${layer.digest.slice(7, 19)}`;
      let last = 0;
      // Every blob is verified as its download completes, so that wrong bytes from a mirror (removed
      // there) are fetched again from the next source.
      const onProgress = (completed: number) => {
        if (Date.now() - last < PROGRESS_INTERVAL_MS) return;
        last = Date.now();
        void progress.send({ status, digest: layer.digest, total: layer.size, completed });
      };
      await sources.attempt((client, from) => leases.fetch({ client, store, ref: from, layer, onProgress, signal: ctx.signal }));
      await progress.send({ status, digest: layer.digest, total: layer.size, completed: layer.size });
    }
    // Each blob was hashed when its download completed (registry/download.ts); every layer is
    // verified before any is published, so a mismatch leaves no blob that nothing references.
    await progress.send({ status: "verifying sha256 digest" });
    for (const layer of layers) await leases.publish(store, layer);
    await progress.send({ status: "writing manifest" });
    await withNames(store, [input], () => commitManifest(store, input, manifest));
    committed = true;
    await unloadIfIdle(scheduler, input); // a loaded copy of the old version must not keep serving
  } finally {
    unpin();
    // Blobs published by a pull that then failed (the manifest write, or a pull sharing them):
    // removed unless a manifest references them or another pull in progress pinned them.
    const published = committed ? [] : leases.published();
    if (published.length > 0) await removeUnreferenced(store, published).catch(() => undefined);
    await leases.release();
    await sources.close();
  }
}

function unique(layers: Layer[]): Layer[] {
  const seen = new Set<string>();
  return layers.filter((l) => !seen.has(l.digest) && seen.add(l.digest));
}
