/**
 * Ollama's runner options reach the load (they were accepted and not used): `num_thread` (over
 * SERVICE_THREADS and the free-core rule), `num_batch` (the context's prompt batch) and `use_mmap`
 * (memory-mapped weights), from a model's PARAMETERs or a request's options; a request that asks
 * for other ones reloads the model, as a different num_ctx does. Without `num_batch`, a model on
 * the CPU gets a batch of 256 (src/runner/batch.ts).
 */
import { readFileSync } from "node:fs";
import t from "tap";
import { CPU_BATCH } from "../../src/runner/batch.js";
import { postJson, startDaemon } from "../helpers/daemon.js";

t.test("num_thread, num_batch and use_mmap reach the runner", async (t) => {
  const { url, app } = await startDaemon(t, {
    models: [
      { name: "plain" },
      { name: "tuned", install: { params: { num_thread: 2, num_batch: 64, use_mmap: false } } },
    ],
  });
  const generate = async (model: string, options: Record<string, unknown> = {}) => {
    const res = await postJson(`${url}/api/generate`, { model, prompt: "hi", raw: true, stream: false, options: { num_predict: 2, ...options } });
    t.equal(res.status, 200, await res.text());
    const loaded = app.services.scheduler.list().find((m) => m.model.display === `${model}:latest`)!;
    const mapped = readFileSync(`/proc/${loaded.pid}/maps`, "utf8").includes(loaded.model.modelPath);
    return { threads: loaded.threads, batchSize: loaded.batchSize, mapped, pid: loaded.pid };
  };

  const plain = await generate("plain");
  t.same([plain.threads, plain.mapped], [1, true], "SERVICE_THREADS (1 in tests), the weights memory-mapped");
  t.equal(plain.batchSize, CPU_BATCH, "no num_batch on the CPU: a batch of 256, not node-llama-cpp's 512");
  const tuned = await generate("tuned");
  t.same(tuned, { threads: 2, batchSize: 64, mapped: false, pid: tuned.pid }, "the model's PARAMETERs: 2 threads, a batch of 64, weights read into memory");
  const asked = await generate("tuned", { num_thread: 1, num_batch: 32 });
  t.same([asked.threads, asked.batchSize], [1, 32], "a request's options win");
  t.not(asked.pid, tuned.pid, "in a runner loaded for them");
  t.equal((await generate("tuned", { num_thread: 1, num_batch: 32 })).pid, asked.pid, "and kept while they stay the same");
});
