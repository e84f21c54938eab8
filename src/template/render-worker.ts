/**
 * A render worker's body: parses the template it is sent (cached per worker) and renders it as
 * Ollama does, answering with the text or the error's status and message, and how much heap the
 * worker now holds (the pool replaces a worker that holds much, which returns its memory at once).
 */
import { getHeapStatistics } from "node:v8";
import { parentPort } from "node:worker_threads";
import { renderOllama } from "./ollama.js";
import type { RenderJob, RenderReply } from "./render-pool.js";
import { parseTemplate } from "./template.js";

const port = parentPort;
if (!port) throw new Error("render-worker runs only as a worker thread");

port.on("message", (job: RenderJob) => {
  let reply: RenderReply;
  try {
    const t = parseTemplate(job.source, job.name, job.options);
    reply = { id: job.id, text: renderOllama(t, job.values, job.limits), heap: 0 };
  } catch (e) {
    const status = typeof (e as { status?: unknown }).status === "number" ? (e as { status: number }).status : 500;
    reply = { id: job.id, error: { status, message: e instanceof Error ? e.message : String(e) }, heap: 0 };
  }
  reply.heap = getHeapStatistics().used_heap_size;
  port.postMessage(reply);
});
