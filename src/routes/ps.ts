/**
 * `GET /api/ps`: the models loaded now, most recently used first, in Ollama's shape.
 *
 * `size` is the memory the loaded model takes (RAM and VRAM, model and context, by node-llama-cpp's
 * accounting), `size_vram` the part of it in VRAM. A model with every layer offloaded shows
 * `size_vram` equal to `size`, as Ollama does ("100% GPU"): what llama.cpp still keeps in host
 * memory then (the token-embedding table, read a row per token) is no layer that could move. `expires_at` is when an idle model unloads; a
 * model in use shows its keep-alive counted from now, and one kept forever a date far in the future
 * (as Ollama does).
 */
import type { ModelPolicyView, PsResponse, RunningModel } from "../api/model-types.js";
import type { ModelPolicy } from "../scheduler/policy.js";
import { sendJson } from "../http/respond.js";
import type { RequestContext, Router } from "../http/router.js";
import { modelDetails } from "../store/model-info.js";
import { listModels } from "../store/admin.js";
import type { Services } from "../chat/services.js";

/** "Forever": what Ollama reports for a negative keep_alive. */
const FOREVER = new Date("2318-01-01T00:00:00Z");

export function psRoutes(router: Router, services: Services): void {
  router.add("GET", "/api/ps", (ctx) => ps(ctx, services));
}

async function ps(ctx: RequestContext, { store, scheduler }: Services): Promise<void> {
  const running = scheduler.list();
  // The manifest digest (as /api/tags shows it) is the hash of the manifest file's bytes.
  const digests = new Map(running.length ? (await listModels(store)).map((m) => [m.key, m.manifestDigest]) : []);
  const models: RunningModel[] = [];
  for (const m of running) {
    models.push({
      name: m.model.display,
      model: m.model.display,
      size: m.ramBytes + m.vramBytes,
      digest: digests.get(m.model.key) ?? m.model.digest.replace(/^sha256:/, ""),
      details: await modelDetails(store, m.model.manifest),
      expires_at: (m.expiresAt ?? (m.keepAliveMs < 0 ? FOREVER : new Date(Date.now() + m.keepAliveMs))).toISOString(),
      size_vram: m.allOnGpu ? m.ramBytes + m.vramBytes : m.vramBytes,
      context_length: m.contextLength,
      num_parallel: m.numParallel,
      queued: m.queued,
      kv_cache_type: m.kvCacheType,
      flash_attention: m.flashAttention,
      ...(m.policy ? { policy: policyView(m.policy) } : {}),
    });
  }
  sendJson(ctx.res, 200, { models } satisfies PsResponse);
}

function policyView(p: ModelPolicy): ModelPolicyView {
  return {
    ...(p.numParallel !== undefined ? { num_parallel: p.numParallel } : {}),
    ...(p.numCtx !== undefined ? { num_ctx: p.numCtx } : {}),
    ...(p.keepAliveMs !== undefined ? { keep_alive: p.keepAliveMs * 1e6 } : {}),
    pinned: p.pinned,
    preload: p.preload,
    options: p.options,
    ...(p.kvCacheType !== undefined ? { kv_cache_type: p.kvCacheType } : {}),
    ...(p.flashAttention !== undefined ? { flash_attention: p.flashAttention } : {}),
    ...(p.gpus !== undefined ? { gpus: p.gpus } : {}),
  };
}
