/**
 * `HEAD /api/blobs/:digest` and `POST /api/blobs/:digest`: is a blob present, and
 * upload one. The upload is streamed to a temporary file in the store while hashing, checked
 * against the digest in the path, then renamed into place: 201 created, 200 already present,
 * 400 on a mismatch, 507 when the disk fills or when unreferenced blobs would pass
 * `SERVICE_MAX_UNREFERENCED_BLOBS` (store/unreferenced.ts, which also removes them after a grace).
 * Every failure removes the temporary file.
 */
import { NotFoundError } from "../errors.js";
import { sendEmpty } from "../http/respond.js";
import type { RequestContext, Router } from "../http/router.js";
import { digestHex } from "../store/store.js";
import { UnreferencedBlobs } from "../store/unreferenced.js";
import type { Services } from "../chat/services.js";

/** Adds the routes and starts collecting unreferenced blobs; returns the function that stops it. */
export function blobRoutes(router: Router, services: Services): () => void {
  const unreferenced = new UnreferencedBlobs(services.store, services.config.maxUnreferencedBlobBytes);
  unreferenced.start();
  router.add("HEAD", "/api/blobs/:digest", (ctx) => head(ctx, services));
  router.add("POST", "/api/blobs/:digest", (ctx) => upload(ctx, services, unreferenced));
  return () => unreferenced.stop();
}

function digestParam(ctx: RequestContext): string {
  const digest = ctx.params.digest ?? "";
  digestHex(digest); // 400 `invalid digest '<digest>'`
  return digest;
}

async function head(ctx: RequestContext, { store }: Services): Promise<void> {
  const digest = digestParam(ctx);
  if (!(await store.hasBlob(digest))) throw new NotFoundError(`blob '${digest}' not found`);
  sendEmpty(ctx.res, 200);
}

async function upload(ctx: RequestContext, { store }: Services, unreferenced: UnreferencedBlobs): Promise<void> {
  const digest = digestParam(ctx);
  if (await store.hasBlob(digest)) {
    // Nothing to store: answer at once; Node reads and discards the rest of the upload.
    await unreferenced.touch(digest);
    ctx.req.resume();
    return sendEmpty(ctx.res, 200);
  }
  await store.requireWritable();
  const length = Number(ctx.req.headers["content-length"]);
  await unreferenced.admit(Number.isSafeInteger(length) && length >= 0 ? length : undefined);
  // The iterator must not destroy the request when the write fails (a full disk): the client is
  // still sending, and a destroyed socket would reach it as ECONNRESET instead of the 507.
  const metered = unreferenced.meter(ctx.req.iterator({ destroyOnReturn: false }));
  let blob: { digest: string; created: boolean } | undefined;
  try {
    blob = await store.addBlobFromStream(metered.source, digest);
  } finally {
    await metered.done(blob);
  }
  sendEmpty(ctx.res, blob.created ? 201 : 200);
}
