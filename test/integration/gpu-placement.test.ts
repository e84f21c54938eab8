/**
 * Per-model GPU placement (the policy file's `gpus`) and SERVICE_GPU_OVERHEAD, on a host without a
 * GPU: what can be seen without one is the runner child's environment (the variables the CUDA
 * runtime and llama.cpp's Vulkan backend read before they enumerate devices), the load spec, and
 * the memory arithmetic (test/native/gpu-memory.test.ts). A real daemon, real runners.
 */
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import t from "tap";
import { postJson, startDaemon } from "../helpers/daemon.js";

/** The environment a process started with. */
function environOf(pid: number): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of readFileSync(`/proc/${pid}/environ`, "utf8").split("\0")) {
    const eq = entry.indexOf("=");
    if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return env;
}

const GPU_VARIABLES = ["CUDA_VISIBLE_DEVICES", "GGML_VK_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"];

t.test("a model placed on GPU 1 gets a runner that sees GPU 1 only; others see what the daemon sees", async (t) => {
  const policy = path.join(t.testdir(), "..", `${path.basename(t.testdirName)}-policy.yaml`);
  writeFileSync(policy, "models:\n  placed:\n    gpus: [1]\n  pair:\n    gpus: [0, 2]\n  cpu:\n    gpus: []\n");
  t.teardown(() => void import("node:fs").then((fs) => fs.rmSync(policy, { force: true })));
  const { url, app } = await startDaemon(t, {
    env: { SERVICE_MODELS_CONFIG: policy, SERVICE_MAX_LOADED_MODELS: "4", SERVICE_GPU: "auto", SERVICE_GPU_OVERHEAD: "512MiB" },
    models: [{ name: "placed" }, { name: "pair" }, { name: "cpu" }, { name: "free" }],
  });
  for (const model of ["placed", "pair", "cpu", "free"]) {
    const res = await postJson(`${url}/api/generate`, { model, prompt: "hi", stream: false, options: { num_predict: 2 } });
    t.equal(res.status, 200, `${model} generates`);
  }
  const byName = new Map(app.services.scheduler.list().map((m) => [m.model.display, m]));
  const env = (name: string) => {
    const pid = byName.get(`${name}:latest`)?.pid;
    if (pid === undefined) throw new Error(`${name} is not loaded`);
    return Object.fromEntries(Object.entries(environOf(pid)).filter(([k]) => GPU_VARIABLES.includes(k)));
  };
  t.same(env("placed"), { CUDA_VISIBLE_DEVICES: "1", GGML_VK_VISIBLE_DEVICES: "1", CUDA_DEVICE_ORDER: "PCI_BUS_ID" }, "gpus: [1]");
  t.same(env("pair"), { CUDA_VISIBLE_DEVICES: "0,2", GGML_VK_VISIBLE_DEVICES: "0,2", CUDA_DEVICE_ORDER: "PCI_BUS_ID" }, "gpus: [0, 2]");
  t.same(env("cpu"), { CUDA_VISIBLE_DEVICES: "", GGML_VK_VISIBLE_DEVICES: "", CUDA_DEVICE_ORDER: "PCI_BUS_ID" }, "gpus: [] hides every GPU");
  const inherited = Object.fromEntries(GPU_VARIABLES.filter((k) => process.env[k] !== undefined).map((k) => [k, process.env[k]!]));
  t.same(env("free"), inherited, "a model without gpus: the daemon's own environment, nothing added");

  const ps = (await (await fetch(`${url}/api/ps`)).json()) as { models: { name: string; policy?: { gpus?: number[] }; size_vram: number }[] };
  t.same(ps.models.find((m) => m.name === "placed:latest")?.policy?.gpus, [1], "/api/ps shows the placement");
  t.ok(ps.models.every((m) => m.size_vram === 0), "nothing in VRAM on a host without a GPU");
});
