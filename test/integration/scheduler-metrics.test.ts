/**
 * GET /api/ps and GET /metrics on the real daemon.
 */
import t from "tap";
import { postJson, startDaemon } from "../helpers/daemon.js";

const FAST = { SERVICE_THREADS: "1" };

/** The value of one sample line of the Prometheus text format (`name{labels} value`). */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

t.test("GET /api/ps lists loaded models in Ollama's shape", async (t) => {
  const { url } = await startDaemon(t, { env: FAST });
  t.same(await (await fetch(`${url}/api/ps`)).json(), { models: [] }, "nothing loaded: an empty list, not null");

  const res = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "", keep_alive: "10m", stream: false });
  t.equal(res.status, 200);
  await res.text();
  const body = (await (await fetch(`${url}/api/ps`)).json()) as { models: Record<string, unknown>[] };
  t.equal(body.models.length, 1);
  const m = body.models[0]!;
  const tags = (await (await fetch(`${url}/api/tags`)).json()) as { models: { digest: string }[] };
  t.same(Object.keys(m).sort(), [
    "context_length",
    "details",
    "digest",
    "expires_at",
    "flash_attention",
    "kv_cache_type",
    "model",
    "name",
    "num_parallel",
    "queued",
    "size",
    "size_vram",
  ]);
  t.equal(m.kv_cache_type, "f16", "lmd: the KV cache type of this load");
  t.equal(m.flash_attention, "auto");
  t.equal(m.num_parallel, 1, "lmd: the slots of this load");
  t.equal(m.queued, 0, "lmd: requests waiting for one");
  t.equal(m.name, "tiny:latest");
  t.equal(m.model, "tiny:latest");
  t.equal(m.digest, tags.models[0]?.digest, "digest as /api/tags shows it");
  t.ok(typeof m.size === "number" && m.size > 600_000, `size ${String(m.size)} bytes: weights and context`);
  t.equal(m.size_vram, 0, "CPU only");
  t.equal(m.context_length, 1024, "SERVICE_CONTEXT_LENGTH");
  t.match(m.details, { format: "gguf", family: "llama" });
  const expires = Date.parse(String(m.expires_at));
  t.ok(Math.abs(expires - (Date.now() + 600_000)) < 30_000, "expires_at: 10 minutes from now");

  await (await postJson(`${url}/api/generate`, { model: "tiny", prompt: "", keep_alive: -1, stream: false })).text();
  const forever = (await (await fetch(`${url}/api/ps`)).json()) as { models: { expires_at: string }[] };
  t.ok(Date.parse(forever.models[0]?.expires_at ?? "") > Date.parse("2300-01-01"), "negative keep_alive: a date far in the future");
});

t.test("GET /metrics counts requests, tokens and speed", async (t) => {
  const { url } = await startDaemon(t, { env: FAST });
  await (await fetch(`${url}/api/version`)).text();
  await (await fetch(`${url}/api/version`)).text();
  await (await fetch(`${url}/no/such/path`)).text();
  const res = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hello there", stream: false, options: { temperature: 0, num_predict: 8 } });
  const out = (await res.json()) as { prompt_eval_count: number; eval_count: number };

  const metrics = await fetch(`${url}/metrics`);
  t.equal(metrics.status, 200);
  t.match(metrics.headers.get("content-type"), /^text\/plain; version=0\.0\.4/);
  const text = await metrics.text();
  t.equal(sample(text, 'lmd_http_requests_total{method="GET",route="/api/version",status="200"}'), 2, "requests by route and status");
  t.equal(sample(text, 'lmd_http_requests_total{method="GET",route="unmatched",status="404"}'), 1, "unknown paths share one label");
  t.equal(sample(text, 'lmd_http_requests_total{method="POST",route="/api/generate",status="200"}'), 1);
  t.equal(sample(text, "lmd_queue_depth"), 0);
  t.equal(sample(text, "lmd_loaded_models"), 1);
  t.equal(sample(text, "lmd_busy_slots"), 0);
  t.equal(sample(text, 'lmd_tokens_generated_total{model="tiny:latest"}'), out.eval_count, "tokens generated = eval_count");
  t.equal(sample(text, 'lmd_prompt_tokens_evaluated_total{model="tiny:latest"}'), out.prompt_eval_count, "tokens evaluated = prompt_eval_count");
  t.equal(sample(text, 'lmd_time_to_first_token_seconds_count{model="tiny:latest"}'), 1, "one time-to-first-token observation");
  t.equal(sample(text, 'lmd_tokens_per_second_count{model="tiny:latest"}'), out.eval_count > 1 ? 1 : 0, "one tokens-per-second observation");
  t.ok((sample(text, "lmd_process_resident_memory_bytes") ?? 0) > 10_000_000, "process metrics");
});
