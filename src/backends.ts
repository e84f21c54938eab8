/**
 * Which compute backends this installation could use, without loading any of them: node-llama-cpp's
 * prebuilt binaries that are installed (its CPU build, and the CUDA and Vulkan builds when their
 * packages are present) and whether the host shows a device for each. `lmd doctor` prints it.
 * A detection that needs the backend loaded (driver version, VRAM) belongs to the runner.
 */
import { existsSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import type { GpuMode } from "./config.js";

export interface Backend {
  name: "cpu" | "cuda" | "vulkan";
  /** node-llama-cpp's prebuilt binary for it is installed. */
  installed: boolean;
  /** The host shows a device for it (always true for the CPU). */
  device: boolean;
  /** Why it cannot be used, when it cannot. */
  problem?: string;
}

const PLATFORM = `${process.platform}-${process.arch}`;

/** Where node-llama-cpp's prebuilt binary package for a build is, if installed. */
function binaryPackage(suffix: string): string | undefined {
  // Looked up as Node would find the package (its exports do not include package.json).
  const dirs = createRequire(import.meta.url).resolve.paths("@node-llama-cpp/x") ?? [];
  return dirs.map((d) => path.join(d, "@node-llama-cpp", `${PLATFORM}${suffix}`)).find((d) => existsSync(path.join(d, "package.json")));
}

function nvidiaDevice(): boolean {
  return existsSync("/dev/nvidiactl") || existsSync("/dev/nvidia0");
}

function renderNode(): boolean {
  try {
    return readdirSync("/dev/dri").some((f) => f.startsWith("renderD"));
  } catch {
    return false;
  }
}

/** The backends found, in the order SERVICE_GPU=auto prefers them (CUDA, Vulkan, CPU). */
export function detectBackends(): Backend[] {
  const with_ = (name: Backend["name"], installed: boolean, device: boolean, what: string): Backend => {
    const b: Backend = { name, installed, device };
    if (!installed) b.problem = `no ${what} build installed`;
    else if (!device) b.problem = `no ${what} device on this host`;
    return b;
  };
  return [
    with_("cuda", binaryPackage("-cuda") !== undefined, nvidiaDevice(), "CUDA"),
    with_("vulkan", binaryPackage("-vulkan") !== undefined, renderNode(), "Vulkan"),
    { name: "cpu", installed: binaryPackage("") !== undefined, device: true, ...(binaryPackage("") === undefined ? { problem: "no CPU build installed" } : {}) },
  ];
}

/** The backend a load would use under SERVICE_GPU (`false` is CPU only), or undefined with none usable. */
export function chosenBackend(backends: Backend[], gpu: GpuMode): Backend | undefined {
  const usable = (b: Backend | undefined) => (b && b.installed && b.device ? b : undefined);
  const byName = (n: Backend["name"]) => backends.find((b) => b.name === n);
  if (gpu === false) return usable(byName("cpu"));
  if (gpu === "cuda" || gpu === "vulkan") return usable(byName(gpu));
  return backends.find((b) => usable(b));
}
