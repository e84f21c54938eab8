/**
 * The start log of the backend (src/backend.ts) on hosts without a GPU: which GPU binaries are
 * installed (an lmd GPU package links them into node_modules; npm puts them there in a checkout),
 * why each is not used, as far as the files tell, and at which level that is logged: a warning
 * for what an lmd GPU package installed, info for a checkout's optional dependencies, an error when
 * SERVICE_GPU insists on a backend that cannot work. The probe process (a backend that may work)
 * needs a GPU host: bench/gpu-check.sh.
 */
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pino } from "pino";
import t from "tap";
import { installedBackends, reportBackend, staticReason, type HostFacts } from "../../src/backend.js";

/** A node_modules with node-llama-cpp `llama`, the CUDA packages linked from a gpu/ directory as lmd-cuda lays them out, Vulkan's as npm does. */
function tree(llama: string, cuda: string | undefined, vulkan: string | undefined): string {
  const root = mkdtempSync(path.join(os.tmpdir(), "lmd-backend-"));
  t.teardown(() => import("node:fs").then((fs) => fs.rmSync(root, { recursive: true, force: true })));
  const nm = path.join(root, "lib", "node_modules");
  const pkg = (dir: string, version: string) => (
    mkdirSync(dir, { recursive: true }),
    writeFileSync(path.join(dir, "package.json"), JSON.stringify({ version }))
  );
  pkg(path.join(nm, "node-llama-cpp"), llama);
  mkdirSync(path.join(nm, "@node-llama-cpp"), { recursive: true });
  if (cuda) {
    for (const name of ["linux-x64-cuda", "linux-x64-cuda-ext"]) {
      pkg(path.join(root, "lib", "gpu", name), cuda);
      symlinkSync(`../../gpu/${name}`, path.join(nm, "@node-llama-cpp", name));
    }
  }
  if (vulkan) pkg(path.join(nm, "@node-llama-cpp", "linux-x64-vulkan"), vulkan);
  return nm;
}

const noGpu: HostFacts = { hasLibrary: () => false, hasDevice: () => false };
const driverNoDevice: HostFacts = { hasLibrary: (n) => n === "libcuda.so.1", hasDevice: () => false };

function capture() {
  const lines: { level: number; msg: string; backend?: string; reason?: string }[] = [];
  return { lines, log: pino({ level: "debug" }, { write: (l: string) => void lines.push(JSON.parse(l)) }) };
}

t.test("the installed backends: version, and whether an lmd GPU package put them there", async (t) => {
  t.same(installedBackends(tree("3.22.1", "3.22.1", "3.22.1")), {
    llamaVersion: "3.22.1",
    installed: [{ backend: "cuda", version: "3.22.1", packaged: true }, { backend: "vulkan", version: "3.22.1", packaged: false }],
  });
  t.same(installedBackends(tree("3.22.1", undefined, undefined)).installed, [], "the lmd package alone: none");
});

t.test("the reasons the files give", async (t) => {
  const cuda = { backend: "cuda" as const, version: "3.22.1", packaged: true };
  const vulkan = { backend: "vulkan" as const, version: "3.22.1", packaged: true };
  t.equal(staticReason(cuda, "3.22.1", noGpu), "the NVIDIA driver is not installed (no libcuda.so.1 on the library path)");
  t.equal(staticReason(cuda, "3.22.1", driverNoDevice), "no NVIDIA device (/dev/nvidiactl is missing: driver not loaded, or the service may not see devices)");
  t.equal(
    staticReason(cuda, "3.23.0", noGpu),
    "its binaries are for node-llama-cpp 3.22.1, lmd runs 3.23.0: install the lmd-cuda package of this lmd version",
    "a mismatch first",
  );
  t.equal(staticReason(vulkan, "3.22.1", noGpu), "the Vulkan loader is not installed (no libvulkan.so.1; Debian: apt install libvulkan1 mesa-vulkan-drivers)");
  t.equal(staticReason(vulkan, "3.22.1", { hasLibrary: () => true, hasDevice: () => false }), "no GPU device (/dev/dri is missing)");
  t.equal(staticReason(cuda, "3.22.1", { hasLibrary: () => true, hasDevice: () => true }), undefined, "may work: the probe decides");
});

t.test("lmd-cuda and lmd-vulkan installed, no GPU: backend cpu at info, each package's reason at warning", async (t) => {
  const nm = tree("3.22.1", "3.22.1", undefined);
  const vk = path.join(path.dirname(nm), "gpu", "linux-x64-vulkan");
  mkdirSync(vk, { recursive: true });
  writeFileSync(path.join(vk, "package.json"), JSON.stringify({ version: "3.22.1" }));
  symlinkSync("../../gpu/linux-x64-vulkan", path.join(nm, "@node-llama-cpp", "linux-x64-vulkan"));
  const { lines, log } = capture();
  const report = await reportBackend("auto", log, noGpu, nm);
  t.equal(report.backend, "cpu");
  t.same(
    lines.map((l) => [l.level, l.msg]),
    [
      [30, "llama.cpp backend: cpu"],
      [40, "lmd-cuda is installed but not used: the NVIDIA driver is not installed (no libcuda.so.1 on the library path); models run on the CPU"],
      [
        40,
        "lmd-vulkan is installed but not used: the Vulkan loader is not installed (no libvulkan.so.1; Debian: apt install libvulkan1 mesa-vulkan-drivers); models run on the CPU",
      ],
    ],
  );
  t.match(lines[1], { backend: "cuda", reason: "the NVIDIA driver is not installed (no libcuda.so.1 on the library path)" }, "the reason is a field too");
});

t.test("a checkout's optional dependencies are mentioned at info, never warned about", async (t) => {
  const { lines, log } = capture();
  await reportBackend("auto", log, noGpu, tree("3.22.1", undefined, "3.22.1"));
  t.same(lines.map((l) => l.level), [30, 30]);
  t.match(lines[1]?.msg, /^the vulkan binaries are installed but not used: the Vulkan loader is not installed/);
});

t.test("the lmd package alone, or SERVICE_GPU=false: one info line, nothing probed", async (t) => {
  for (const [mode, msg] of [["auto", "llama.cpp backend: cpu"], [false, "llama.cpp backend: cpu (SERVICE_GPU=false)"]] as const) {
    const { lines, log } = capture();
    await reportBackend(mode, log, noGpu, tree("3.22.1", mode === false ? "3.22.1" : undefined, undefined));
    t.same(lines.map((l) => [l.level, l.msg]), [[30, msg]]);
  }
});

t.test("SERVICE_GPU=cuda that cannot work is an error: model loads will fail", async (t) => {
  const { lines, log } = capture();
  await reportBackend("cuda", log, noGpu, tree("3.22.1", "3.22.1", undefined));
  t.same(
    lines.map((l) => [l.level, l.msg]),
    [
      [30, "llama.cpp backend: cpu"],
      [
        50,
        "SERVICE_GPU is cuda, but the cuda backend cannot be used: the NVIDIA driver is not installed (no libcuda.so.1 on the library path); model loads will fail",
      ],
    ],
  );
  const missing = capture();
  await reportBackend("vulkan", missing.log, noGpu, tree("3.22.1", undefined, undefined));
  t.match(missing.lines[1], {
    level: 50,
    msg: "SERVICE_GPU is vulkan, but the vulkan backend cannot be used: the vulkan binaries are not installed (@node-llama-cpp/linux-x64-vulkan; package lmd-vulkan); model loads will fail",
  });
});

t.test("when the files say a backend may work, the probe process names what the dynamic linker refused", async (t) => {
  // This host has node-llama-cpp's GPU packages (npm's optional dependencies) and no GPU: told that
  // the driver and loader are there, the real probe runs, falls back to the CPU and loads each
  // backend's library to say why.
  const present = installedBackends().installed.map((b) => b.backend);
  if (present.length < 2) return t.skip(`needs node-llama-cpp's CUDA and Vulkan packages in node_modules (found: ${present.join(", ") || "none"})`);
  const { lines, log } = capture();
  const report = await reportBackend("auto", log, { hasLibrary: () => true, hasDevice: () => true });
  t.equal(report.backend, "cpu");
  t.equal(report.error, undefined, "node-llama-cpp opened (on the CPU)");
  const reasons = Object.fromEntries(report.unused.map((u) => [u.backend, u.reason]));
  const notLoadable = (backend: string) =>
    new RegExp(`^libggml-${backend}\\.so does not load: \\S+: cannot open shared object file|^its library loads, but the backend found no usable device$`);
  t.match(reasons.cuda, notLoadable("cuda"), "cuda: the missing library, or no device");
  t.match(reasons.vulkan, notLoadable("vulkan"), "vulkan: the missing library, or no device");
  t.ok(lines.some((l) => l.level === 30 && l.msg.startsWith("the cuda binaries are installed but not used: ")), "logged (at info: npm installed them here)");
});
