/**
 * SERVICE_GPU=cuda or vulkan insists on that backend (src/runner/engine.ts). node-llama-cpp hands
 * back a Llama with `gpu: false` when a locally built CUDA addon loads but its backend finds no
 * device (seen with bench/build-cuda.sh's build on a machine whose driver is older than the CUDA
 * runtime: `ggml_cuda_init: failed to initialize CUDA`); the runner then loaded every model on the
 * CPU and said so only in a log line. No CI machine has such a build, so getLlama is stood in for
 * by a function that answers as node-llama-cpp did there.
 */
import t from "tap";
import { LlamaLogLevel, type getLlama, type Llama } from "node-llama-cpp";
import { openLlama } from "../../src/runner/engine.js";

const CUDA_FAILED = "ggml_cuda_init: failed to initialize CUDA: CUDA driver version is insufficient for CUDA runtime version";

/** A getLlama whose addon loaded with `gpu` (after logging `error`, if any); counts disposals. */
function fakeGetLlama(gpu: "cuda" | "vulkan" | false, error?: string) {
  const state = { disposed: 0, asked: undefined as unknown };
  const get = (async (options: Parameters<typeof getLlama>[0]) => {
    state.asked = options;
    const opts = options as { logger?: (level: LlamaLogLevel, message: string) => void };
    if (error) opts.logger?.(LlamaLogLevel.error, error);
    return { gpu, dispose: async () => void state.disposed++ } as unknown as Llama;
  }) as typeof getLlama;
  return { get, state };
}

t.test("cuda asked for, the backend found no device: the load fails with llama.cpp's reason", async (t) => {
  const { get, state } = fakeGetLlama(false, CUDA_FAILED);
  const logged: string[] = [];
  await t.rejects(openLlama("cuda", (_level, message) => logged.push(message), get), {
    message: `SERVICE_GPU is cuda, but the cuda backend found no usable device (${CUDA_FAILED})`,
  });
  t.equal(state.disposed, 1, "the Llama that came back is disposed");
  t.match(state.asked, { gpu: "cuda", build: "never" }, "node-llama-cpp was asked for cuda, never to build");
  t.same(logged, [`llama.cpp: ${CUDA_FAILED}`], "llama.cpp's line is still logged");
});

t.test("vulkan asked for, no device and no reason logged: the load fails", async (t) => {
  const { get } = fakeGetLlama(false);
  await t.rejects(openLlama("vulkan", () => undefined, get), { message: "SERVICE_GPU is vulkan, but the vulkan backend found no usable device" });
});

t.test("auto falls back to the CPU; a backend that found its device, or the CPU asked for, loads", async (t) => {
  for (const [asked, got] of [["auto", false], ["auto", "cuda"], ["cuda", "cuda"], ["vulkan", "vulkan"], [false, false]] as const) {
    const { get, state } = fakeGetLlama(got, got === false && asked === "auto" ? CUDA_FAILED : undefined);
    const llama = await openLlama(asked, () => undefined, get);
    t.equal(llama.gpu, got, `asked ${String(asked)}, got ${String(got)}`);
    t.equal(state.disposed, 0);
  }
});
