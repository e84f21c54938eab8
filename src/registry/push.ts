/**
 * Uploading to a registry (distribution spec, "pushing blobs" and "pushing manifests"):
 * `HEAD` the blob (skip it when present), `POST .../blobs/uploads/` → 202 + Location,
 * `PATCH <location>` with the bytes, `PUT <location>?digest=<digest>` → 201; then
 * `PUT .../manifests/<tag>`. Uploads stream the blob from the store and are not retried.
 */
import { createReadStream } from "node:fs";
import { Transform } from "node:stream";
import { MEDIA, type Manifest } from "../store/store.js";
import { blobUrl, uploadUrl, type RegistryRef } from "./reference.js";
import type { RegistryClient, RegistryResponse } from "./client.js";
import { RegistryError, expectStatus, header } from "./http.js";
import type { BlobTransfer } from "./transfer.js";

/** Pushes one blob unless the registry has it; `onProgress(bytes)` reports bytes sent. */
export async function pushBlob(transfer: BlobTransfer): Promise<void> {
  const { client, store, ref, layer, onProgress, signal } = transfer;
  const head = await client.send(blobUrl(ref, layer.digest), { method: "HEAD", signal });
  await head.body.dump();
  if (head.statusCode === 200) return onProgress(layer.size);
  if (head.statusCode !== 404) await expectStatus(head, [404], `push ${layer.digest.slice(7, 19)}`);

  const started = await client.send(uploadUrl(ref), { method: "POST", headers: { "content-length": "0" }, signal });
  await expectStatus(started, [202], `push ${layer.digest.slice(7, 19)}`);
  await started.body.dump();
  let location = nextLocation(started);

  if (layer.size > 0) {
    const file = await store.insideStore(store.blobPath(layer.digest));
    let sent = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _enc, done) {
        sent += chunk.length;
        onProgress(sent);
        done(null, chunk);
      },
    });
    const body = createReadStream(file).pipe(counter);
    const headers = { "content-type": "application/octet-stream", "content-length": String(layer.size), "content-range": `0-${layer.size - 1}` };
    const patched = await client.send(location, { method: "PATCH", headers, body, signal });
    await expectStatus(patched, [202, 204], `push ${layer.digest.slice(7, 19)}`);
    await patched.body.dump();
    location = nextLocation(patched, location);
  }

  const done = new URL(location);
  done.searchParams.set("digest", layer.digest);
  const put = await client.send(done.toString(), { method: "PUT", headers: { "content-length": "0" }, signal });
  await expectStatus(put, [201, 204], `push ${layer.digest.slice(7, 19)}`);
  await put.body.dump();
  onProgress(layer.size);
}

/** Uploads the manifest under the reference's tag. */
export async function pushManifest(client: RegistryClient, ref: RegistryRef, manifest: Manifest, signal: AbortSignal): Promise<void> {
  const body = JSON.stringify({ ...manifest, mediaType: manifest.mediaType ?? MEDIA.manifest });
  const url = `${ref.origin}/v2/${ref.repository}/manifests/${encodeURIComponent(ref.tag)}`;
  const res = await client.send(url, { method: "PUT", headers: { "content-type": MEDIA.manifest }, body, signal });
  await expectStatus(res, [200, 201, 202], "push manifest");
  await res.body.dump();
}

/** The upload URL the registry returned (relative to the request), or the previous one. */
function nextLocation(res: RegistryResponse, previous?: string): string {
  const location = header(res.headers, "location");
  if (!location) {
    if (previous) return previous;
    throw new RegistryError("registry did not return an upload location");
  }
  return new URL(location, res.url).toString();
}
