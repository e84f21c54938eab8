/**
 * llama.cpp's own llama-server, built once from the source node-llama-cpp ships
 * (bench/build-llama-server.sh), as the upper bound for decode speed. Optional: `--llama-server`.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import path from "node:path";
import type { Sampling } from "./http.js";

/** A free loopback port (for the servers the benchmark starts). */
export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export async function startLlamaServer(root: string, cache: string, model: string, threads: number, parallel = 1): Promise<{ url: string; child: ChildProcess }> {
  process.stderr.write("building llama-server (once; minutes)…\n");
  const bin = execFileSync(path.join(root, "bench/build-llama-server.sh"), [cache], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim().split("\n").pop()!;
  const port = await freePort();
  const child = spawn(bin, ["-m", model, "-t", String(threads), "-tb", String(threads), "-c", String(4096 * parallel), "-np", String(parallel), "--host", "127.0.0.1", "--port", String(port)], { stdio: "ignore" });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    const ok = await fetch(`${url}/health`).then((r) => r.ok, () => false);
    if (ok) return { url, child };
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill("SIGKILL");
  throw new Error("llama-server did not become healthy within 60 s");
}

/** Client-side decode tokens/s of one streamed completion (tokens after the first, per second). */
export async function llamaServerDecode(url: string, prompt: string, tokens: number, s: Sampling): Promise<number> {
  const body = { prompt, n_predict: tokens, stream: true, cache_prompt: false, temperature: s.temperature, top_k: s.top_k, top_p: s.top_p, min_p: s.min_p, seed: s.seed, repeat_penalty: s.repeat_penalty };
  const res = await fetch(`${url}/completion`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  if (!res.ok || !res.body) throw new Error(`llama-server answered ${res.status}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let first = 0;
  let last = 0;
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (!line.startsWith("data: ")) continue;
      const data = JSON.parse(line.slice(6)) as { stop?: boolean; timings?: { predicted_n: number } };
      if (data.stop) n = data.timings?.predicted_n ?? n;
      else {
        const now = performance.now();
        if (!first) first = now;
        last = now;
      }
    }
  }
  return (n - 1) / ((last - first) / 1000);
}

/** Prompt tokens/s of a fresh prompt (llama-server's own timing of the prompt evaluation). */
export async function llamaServerPrefill(url: string, prompt: string): Promise<number> {
  const res = await fetch(`${url}/completion`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt, n_predict: 1, cache_prompt: false }) });
  const body = (await res.json()) as { timings?: { prompt_per_second?: number } };
  return body.timings?.prompt_per_second ?? NaN;
}
