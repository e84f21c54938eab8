/**
 * A runner's main thread kept awake while its decode loop runs a step, for a model whose every layer
 * is on a GPU. Each token crosses between the runner's main thread and the libuv thread that
 * decodes and samples; a thread that went to sleep waiting must be woken first, which a short GPU
 * step feels (llama-server samples and decodes on one thread) and a long CPU step hides. With an
 * immediate always pending, the event loop polls for I/O without sleeping, so the sampled token is
 * taken up at once: a single stream on a GPU decodes measurably faster, level with llama-server
 * (docs/benchmarks.md, "On a GPU"). It spends one core while a step runs, which a GPU host has to
 * spare and a CPU-only one needs for its decoding threads.
 */

/** Whether the runner of a model with `gpuLayers` of its `totalLayers` offloaded stays awake while it decodes. */
export function awakeFor(gpuLayers: number, totalLayers: number): boolean {
  return gpuLayers > 0 && gpuLayers >= totalLayers;
}

/** Returns a kick that keeps the event loop turning until `busy()` is false; one chain of turns at a time. */
export function awakeWhile(busy: () => boolean): () => void {
  let turning = false;
  const turn = () => {
    if (busy()) return void setImmediate(turn);
    turning = false;
  };
  return () => {
    if (turning) return;
    turning = true;
    setImmediate(turn);
  };
}
