/**
 * GPU placement and the VRAM reserve without a GPU: the policy file's `gpus` (read, refused when
 * malformed, carried into the load spec, a change reloads), SERVICE_GPU_OVERHEAD and its alias, the
 * memory check's VRAM room, node-llama-cpp's padding, and `/api/ps`'s `size_vram` rule.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { loadConfig } from "../../src/config.js";
import { visibleDevicesEnv } from "../../src/runner/spawn.js";
import { vramPadding } from "../../src/runner/engine.js";
import type { MemoryEstimate } from "../../src/runner/types.js";
import { shortfall, vramRoom } from "../../src/scheduler/memory.js";
import { readPolicyFile, type PolicyTable } from "../../src/scheduler/policy.js";
import { allLayersOnGpu } from "../../src/scheduler/scheduler.js";
import { nameKey, parseModelName } from "../../src/store/names.js";
import { fakeModel, fakeScheduler } from "../helpers/fake-runner.js";

const GiB = 1024 ** 3;
const dir = mkdtempSync(path.join(os.tmpdir(), "lmd-gpu-memory-"));
t.teardown(() => import("node:fs").then((fs) => fs.rmSync(dir, { recursive: true, force: true })));

async function policy(text: string): Promise<PolicyTable> {
  const file = path.join(dir, `p${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, text);
  return readPolicyFile(file);
}

t.test("SERVICE_GPU_OVERHEAD: a size or bytes, 0 by default, OLLAMA_GPU_OVERHEAD as its alias", async (t) => {
  t.equal(loadConfig({}).gpuOverheadBytes, 0);
  t.equal(loadConfig({ SERVICE_GPU_OVERHEAD: "1GiB" }).gpuOverheadBytes, GiB);
  t.equal(loadConfig({ OLLAMA_GPU_OVERHEAD: "536870912" }).gpuOverheadBytes, 512 * 1024 ** 2, "Ollama's byte count");
  t.equal(loadConfig({ OLLAMA_GPU_OVERHEAD: "1", SERVICE_GPU_OVERHEAD: "2MiB" }).gpuOverheadBytes, 2 * 1024 ** 2, "SERVICE_* wins");
  t.throws(() => loadConfig({ SERVICE_GPU_OVERHEAD: "lots" }), {
    message: "invalid configuration: SERVICE_GPU_OVERHEAD: 'lots' is not a size (examples: 1GiB, 536870912, 0)",
  });
});

t.test("the VRAM room is the free VRAM less the reserve on each GPU the runner sees", async (t) => {
  t.equal(vramRoom({ vramFreeBytes: 10 * GiB, gpuDevices: 1 }, 0), 10 * GiB);
  t.equal(vramRoom({ vramFreeBytes: 10 * GiB, gpuDevices: 1 }, 2 * GiB), 8 * GiB);
  t.equal(vramRoom({ vramFreeBytes: 10 * GiB, gpuDevices: 2 }, 2 * GiB), 6 * GiB, "two GPUs: reserved twice");
  t.equal(vramRoom({ vramFreeBytes: GiB, gpuDevices: 1 }, 2 * GiB), 0, "never negative");
  t.equal(vramRoom({ vramFreeBytes: 0, gpuDevices: 0 }, 2 * GiB), 0, "CPU");
  const need = { ramBytes: GiB, vramBytes: 7 * GiB, vramFreeBytes: 10 * GiB, gpuLayers: 33, gpuDevices: 1 };
  t.equal(shortfall(need, { ram: 4 * GiB, vram: vramRoom(need, 0) }), undefined, "fits without a reserve");
  t.equal(shortfall(need, { ram: 4 * GiB, vram: vramRoom(need, 4 * GiB) }), "needs 7.0 GiB of VRAM, 6.0 GiB available", "refused with it");
  t.equal(vramPadding(80 * GiB, 0), Math.floor(1.6 * GiB), "node-llama-cpp's own margin (capped at 1.6 GiB)");
  t.equal(vramPadding(8 * GiB, GiB), Math.floor(8 * GiB * 0.08) + GiB, "plus the reserve");
});

t.test("a load refused by the reserve, admitted without it (the scheduler's check)", async (t) => {
  const model = fakeModel("m");
  const start = (overhead: number) => {
    const estimate: MemoryEstimate = { ramBytes: 1, vramBytes: 7 * GiB, vramFreeBytes: 10 * GiB, gpuDevices: 1, gpuLayers: 33 };
    const info = { ramBytes: 1, vramBytes: 7 * GiB, gpu: "cuda" };
    const { scheduler } = fakeScheduler({ maxQueue: 1, gpu: "auto", gpuOverheadBytes: overhead }, () => ({ estimate, info }));
    return scheduler.acquire(model);
  };
  (await start(2 * GiB)).release();
  await t.rejects(start(4 * GiB), {
    message: "failed to load model 'm:latest': not enough memory to load the model (needs 7.0 GiB of VRAM, 6.0 GiB available)",
  });
});

t.test("the policy file's gpus: read, checked, and carried into the load spec", async (t) => {
  const p = await policy("models:\n  a:\n    gpus: [1]\n  b:\n    gpus: []\n  c: {}\n");
  t.same(p.for(nameKey(parseModelName("a")))?.gpus, [1]);
  t.same(p.entries().find((e) => e.name === "b")?.gpus, []);
  t.equal(p.entries().find((e) => e.name === "c")?.gpus, undefined);
  await t.rejects(policy("models:\n  a:\n    gpus: [-1]\n"), { message: /\/models\/a\/gpus\/0 must be >= 0$/ });
  await t.rejects(policy("models:\n  a:\n    gpus: 1\n"), { message: /\/models\/a\/gpus must be array$/ });
  await t.rejects(policy("models:\n  a:\n    gpus: [1, 1]\n"), { message: /\/models\/a\/gpus must NOT have duplicate items/ });

  let table = p;
  const { scheduler: s, runners } = fakeScheduler({ maxLoaded: 3, maxQueue: 1, gpu: "auto", gpuOverheadBytes: GiB, policy: () => table });
  const specs = runners.specs;
  const model = (name: string) => ({ ...fakeModel(nameKey(parseModelName(name))), display: `${name}:latest` });
  for (const name of ["a", "b", "c"]) (await s.acquire(model(name))).release();
  t.match(specs[0], { gpus: [1], gpu: "auto", gpuOverheadBytes: GiB }, "a: GPU 1, the reserve");
  t.match(specs[1], { gpus: [], gpu: false }, "b: no GPU, so no backend is probed");
  t.notOk("gpus" in specs[2]!, "c: every GPU");
  table = await policy("models:\n  a:\n    gpus: [0]\n  b:\n    gpus: []\n  c: {}\n");
  s.applyPolicy();
  (await s.acquire(model("a"))).release();
  t.equal(specs.length, 4, "a changed placement reloads the model");
  t.same(specs[3]?.gpus, [0]);
});

t.test("the child's variables for a placement", async (t) => {
  t.same(visibleDevicesEnv([1]), { CUDA_DEVICE_ORDER: "PCI_BUS_ID", CUDA_VISIBLE_DEVICES: "1", GGML_VK_VISIBLE_DEVICES: "1" });
  t.same(visibleDevicesEnv([]), { CUDA_DEVICE_ORDER: "PCI_BUS_ID", CUDA_VISIBLE_DEVICES: "", GGML_VK_VISIBLE_DEVICES: "" });
});

t.test("/api/ps size_vram: all of size when every layer is offloaded, the VRAM part otherwise", async (t) => {
  t.ok(allLayersOnGpu({ gpu: "cuda", gpuLayers: 17, totalLayers: 17, vramBytes: 100 }), "every layer");
  t.notOk(allLayersOnGpu({ gpu: "cuda", gpuLayers: 16, totalLayers: 17, vramBytes: 100 }), "one layer on the CPU");
  t.notOk(allLayersOnGpu({ gpu: false, gpuLayers: 0, totalLayers: 17, vramBytes: 0 }), "CPU");
  t.notOk(allLayersOnGpu({ gpu: "cuda", gpuLayers: 17, totalLayers: undefined, vramBytes: 100 }), "unknown");
});
