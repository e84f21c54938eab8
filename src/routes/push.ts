/**
 * `POST /api/push`: upload a model from the store to an Ollama-protocol registry.
 * The model must be stored under the name it is pushed to (`<host>/<namespace>/<model>:<tag>`;
 * copy it there first). Progress NDJSON: `retrieving manifest`, `pushing <digest prefix>` with
 * `digest`/`total`/`completed`, `pushing manifest`, `success`; `stream:false` gives one object.
 */
import type { PushRequest } from "../api/model-types.js";
import { pushSchema } from "../api/model-schemas.js";
import { ModelNotFoundError } from "../errors.js";
import { readJson } from "../http/body.js";
import type { RequestContext, Router } from "../http/router.js";
import { compileValidator } from "../http/validate.js";
import { printable } from "../store/names.js";
import { registryRef } from "../registry/reference.js";
import { pushBlob, pushManifest } from "../registry/push.js";
import { openClient } from "../registry/client.js";
import { modelField, Progress } from "./model-common.js";
import type { Services } from "../chat/services.js";

const validate = compileValidator<PushRequest>(pushSchema, { asGo: true });

export function pushRoutes(router: Router, services: Services): void {
  router.add("POST", "/api/push", (ctx) => push(ctx, services));
}

async function push(ctx: RequestContext, { store, config }: Services): Promise<void> {
  const body = validate(await readJson(ctx.req, ctx.maxBodyBytes));
  const input = modelField(body);
  const ref = registryRef(input, body.insecure === true);
  const found = await store.findModel(input);
  if (!found) throw new ModelNotFoundError(printable(input));
  const { manifest } = found;
  const client = await openClient(ref, config.registry);
  const unpin = store.pin([manifest.config.digest, ...manifest.layers.map((l) => l.digest)]);
  try {
    const progress = new Progress(ctx.res, body.stream !== false);
    await progress.send({ status: "retrieving manifest" });
    for (const layer of [...manifest.layers, manifest.config]) {
      const status = `pushing ${layer.digest.slice(7, 19)}`;
      let last = 0;
      const onProgress = (completed: number) => {
        if (Date.now() - last < 200 && completed < layer.size) return;
        last = Date.now();
        void progress.send({ status, digest: layer.digest, total: layer.size, completed });
      };
      await pushBlob({ client, store, ref, layer, onProgress, signal: ctx.signal });
    }
    await progress.send({ status: "pushing manifest" });
    await pushManifest(client, ref, manifest, ctx.signal);
    progress.done();
  } finally {
    unpin();
    await client.close();
  }
}
