/**
 * A GPU backend that opens and then fails at its first decode (prebuilt CUDA binaries built with a
 * newer CUDA than the driver supports: the runner aborts with `CUDA error: the provided PTX was
 * compiled with an unsupported toolchain`) is found at start by the probe's smoke test
 * (src/backend.ts, src/runner/probe.ts, src/runner/smoke.ts). With SERVICE_GPU=auto the runners then
 * get `gpu: false`; with SERVICE_GPU=cuda loads are refused with the reason. This host has no GPU:
 * the probe's answer from such a host is given to findBackend, a process that dies as the probe
 * did there stands in for it, and the real probe and smoke test run on the CPU.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { getLlama } from "node-llama-cpp";
import { pino } from "pino";
import t from "tap";
import { findBackend, logReport, runnerGpu, runProbe, SMOKE_MARKER, type HostFacts, type Probe } from "../../src/backend.js";
import { silentLogger } from "../../src/logger.js";
import { Scheduler } from "../../src/scheduler/scheduler.js";
import { smokeTest } from "../../src/runner/smoke.js";
import type { Runner } from "../../src/runner/client.js";
import type { LoadSpec } from "../../src/runner/types.js";
import type { ResolvedModel } from "../../src/store/store.js";
import type { ProbeResult } from "../../src/runner/probe.js";
import type { GpuMode } from "../../src/config.js";

const PTX = "CUDA error: the provided PTX was compiled with an unsupported toolchain";
const gpuHost: HostFacts = { hasLibrary: () => true, hasDevice: () => true };

function tmp(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lmd-smoke-test-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A node_modules with node-llama-cpp 3.22.1 and its CUDA packages of the same version, as npm installs them. */
function cudaTree(): string {
  const nm = path.join(tmp(), "node_modules");
  for (const pkg of ["node-llama-cpp", "@node-llama-cpp/linux-x64-cuda", "@node-llama-cpp/linux-x64-cuda-ext"]) {
    mkdirSync(path.join(nm, pkg), { recursive: true });
    writeFileSync(path.join(nm, pkg, "package.json"), JSON.stringify({ version: "3.22.1" }));
  }
  return nm;
}

/** The probe's answer on the H200 whose driver supports CUDA 13.0, with binaries built for 13.1. */
function probeFrom(answer: Partial<ProbeResult>): Probe & { calls: number } {
  const probe = Object.assign(
    async (_mode: GpuMode) => {
      probe.calls++;
      return { backend: "cuda", devices: ["NVIDIA H200"], vramBytes: 150e9, reasons: {}, smoke: "failed", smokeError: PTX, ...answer } as ProbeResult;
    },
    { calls: 0 },
  );
  return probe;
}

function capture() {
  const lines: { level: number; msg: string; backend?: string; reason?: string }[] = [];
  return { lines, log: pino({ level: "debug" }, { write: (l: string) => void lines.push(JSON.parse(l)) }) };
}

const REASON = `the cuda backend fails its first decode on NVIDIA H200: ${PTX} (update the NVIDIA driver, or set SERVICE_GPU=false)`;

t.test("auto, the CUDA backend fails its smoke test: cpu, a warning with llama.cpp's reason, runners get gpu false", async (t) => {
  const probe = probeFrom({});
  const report = await findBackend("auto", gpuHost, cudaTree(), probe);
  t.equal(probe.calls, 1, "the probe ran");
  t.equal(report.backend, "cpu");
  t.same(report.unused, [{ backend: "cuda", packaged: false, reason: REASON, broken: true }]);
  const { lines, log } = capture();
  logReport("auto", report, log);
  t.same(lines.map((l) => [l.level, l.msg]), [
    [30, "llama.cpp backend: cpu"],
    [40, `the cuda binaries are installed but not used: ${REASON}; models run on the CPU`],
  ], "a warning even for binaries npm installed: node-llama-cpp would take them");
  t.same(runnerGpu("auto", report), { gpu: false });
});

t.test("auto, the smoke test passes: the CUDA backend is used and the runners keep auto", async (t) => {
  const report = await findBackend("auto", gpuHost, cudaTree(), probeFrom({ smoke: "passed", smokeError: undefined }));
  t.equal(report.backend, "cuda");
  t.same(report.devices, ["NVIDIA H200"]);
  t.same(report.unused, []);
  t.same(runnerGpu("auto", report), { gpu: "auto" });
});

t.test("SERVICE_GPU=cuda, the smoke test fails: an error at start, and loads are refused with the reason", async (t) => {
  const report = await findBackend("cuda", gpuHost, cudaTree(), probeFrom({}));
  t.equal(report.error, REASON);
  const { lines, log } = capture();
  logReport("cuda", report, log);
  t.same(lines.map((l) => [l.level, l.msg]), [
    [30, "llama.cpp backend: cpu"],
    [50, `SERVICE_GPU is cuda, but the cuda backend cannot be used: ${REASON}; model loads will fail`],
  ]);
  const decided = runnerGpu("cuda", report);
  t.same(decided, { gpu: "cuda", refusal: `no usable llama.cpp backend: SERVICE_GPU is cuda, but ${REASON}` });

  const { scheduler, specs } = schedulerWithSpecs();
  scheduler.useGpu(decided.gpu, decided.refusal);
  await t.rejects(scheduler.acquire(model), { status: 500, message: `failed to load model 'm:latest': ${decided.refusal}` });
  t.equal(specs.length, 0, "no runner was started");
});

t.test("the scheduler starts runners with the gpu the report decided; a model loaded before it is reloaded", async (t) => {
  const { scheduler, specs } = schedulerWithSpecs();
  (await scheduler.acquire(model)).release();
  t.equal(specs[0]?.gpu, "auto", "before the report (a preload): SERVICE_GPU");
  scheduler.useGpu(runnerGpu("auto", await findBackend("auto", gpuHost, cudaTree(), probeFrom({}))).gpu);
  (await scheduler.acquire(model)).release();
  t.equal(specs.length, 2, "the next request reloads the idle model");
  t.equal(specs[1]?.gpu, false, "after a failed smoke test: the CPU");
});

t.test("a probe that dies in its smoke test: the backend failed it, with llama.cpp's error line, and the scratch model is removed", async (t) => {
  // Does what the probe did on that host: answers that CUDA opened, starts the smoke test, writes
  // the model, and the first decode aborts the process: llama.cpp's lines on stdout (node-llama-cpp's
  // addon writes errors there once its logger is unset), ggml's abort line on stderr.
  const dir = tmp();
  const entry = path.join(dir, "dying-probe.mjs");
  const llamaLines = [`${PTX}.`, "  current device: 0, in function ggml_cuda_mul_mat at ggml-cuda.cu:1234", "  cudaGetLastError()"].join("\n") + "\n";
  writeFileSync(
    entry,
    `import { writeFileSync, writeSync } from "node:fs";
     const [, , , scratch] = process.argv;
     writeSync(1, "ggml_vulkan: Error: an error while the backends opened\\n");
     process.send({ backend: "cuda", devices: ["NVIDIA H200"], vramBytes: 1, reasons: {}, smoke: "pending" }, () => {
       for (const fd of [1, 2]) writeSync(fd, ${JSON.stringify(SMOKE_MARKER + "\n")});
       writeFileSync(scratch + "/smoke.gguf", "GGUF");
       writeSync(1, ${JSON.stringify(llamaLines)});
       writeSync(2, "/build/ggml-cuda.cu:108: CUDA error\\n");
       process.abort();
     });`,
  );
  const scratchParent = tmp();
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = scratchParent;
  t.teardown(() => void (saved === undefined ? delete process.env.TMPDIR : (process.env.TMPDIR = saved)));
  const result = await runProbe("auto", ["cuda"], 60_000, entry);
  t.match(result, { backend: "cuda", smoke: "failed" });
  t.equal(result.smokeError, PTX, "llama.cpp's line that says why, not ggml's abort line or an error from before the test");
  t.same(readdirSync(scratchParent), [], "the scratch directory and its model are gone");
  const report = await findBackend("auto", gpuHost, cudaTree(), async () => result);
  t.equal(report.unused[0]?.reason, REASON);
});

t.test("the real probe on a host without a GPU backend: no smoke test, nothing left behind", async (t) => {
  const scratchParent = tmp();
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = scratchParent;
  t.teardown(() => void (saved === undefined ? delete process.env.TMPDIR : (process.env.TMPDIR = saved)));
  const result = await runProbe("auto", []);
  t.equal(result.error, undefined, "node-llama-cpp opened");
  t.equal(result.backend, "cpu");
  t.equal(result.smoke, "skipped");
  t.same(readdirSync(scratchParent), []);
});

t.test("the smoke test itself decodes and samples on a working backend (the CPU here)", async (t) => {
  const llama = await getLlama({ gpu: false, build: "never", progressLogs: false });
  t.teardown(() => llama.dispose());
  const dir = tmp();
  const token = await smokeTest(llama, dir);
  t.type(token, "number", "one token sampled");
  t.same(readdirSync(dir), [], "its model file is removed");
});

const model = { key: "m", display: "m:latest", digest: `sha256:${"0".repeat(64)}`, modelPath: "/nowhere/m", params: {} } as unknown as ResolvedModel;

function schedulerWithSpecs() {
  const specs: LoadSpec[] = [];
  const startRunner = async (spec: LoadSpec): Promise<Runner> => {
    specs.push(spec);
    return { info: { contextSize: 1024, ramBytes: 0, vramBytes: 0, gpu: false }, alive: true, pid: 1, stop: async () => undefined } as unknown as Runner;
  };
  const scheduler = new Scheduler({ log: silentLogger(), numParallel: 1, maxLoaded: 1, maxQueue: 1, defaultKeepAliveMs: -1, defaultContextLength: 1024, threads: 1, gpu: "auto", startRunner });
  return { scheduler, specs };
}
