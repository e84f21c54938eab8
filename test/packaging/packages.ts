/**
 * Shared by the packaging tests: their preconditions (root, tools) and the packages under test.
 *
 * On CI (root, tools installed by .ci/run) these tests always run. Elsewhere a missing
 * precondition is a failure with a clear message, unless LMD_SKIP_PACKAGING=1 says to skip.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Test } from "tap";

export const REPO = fileURLToPath(new URL("../../", import.meta.url));
export const INSTALL_TEST = `${REPO}test/packaging/install-test.sh`;
/** Where the install test keeps its Debian root, overlays and repacked packages. */
export const WORK = `${REPO}dist/packaging/install-test`;

const VERSION = (JSON.parse(readFileSync(`${REPO}package.json`, "utf8")) as { version: string }).version;
export const DEB = `${REPO}dist/packages/lmd_${VERSION}_amd64.deb`;
export const RPM = `${REPO}dist/packages/lmd-${VERSION}.x86_64.rpm`;
/** The GPU packages (node-llama-cpp's CUDA and Vulkan binaries), built beside lmd's. */
export const GPU_DEBS = { cuda: `${REPO}dist/packages/lmd-cuda_${VERSION}_amd64.deb`, vulkan: `${REPO}dist/packages/lmd-vulkan_${VERSION}_amd64.deb` };
export const GPU_RPMS = { cuda: `${REPO}dist/packages/lmd-cuda-${VERSION}.x86_64.rpm`, vulkan: `${REPO}dist/packages/lmd-vulkan-${VERSION}.x86_64.rpm` };
const ALL = [DEB, RPM, ...Object.values(GPU_DEBS), ...Object.values(GPU_RPMS)];

/** The apt packages that provide the tools, for the failure message. */
const APT = "mmdebstrap systemd-container rpm lintian rpmlint dpkg-dev fakeroot";

/**
 * Returns true when the tests may run. Otherwise fails `t` (or, with LMD_SKIP_PACKAGING=1,
 * skips it) with the reason, and returns false.
 */
export function packagingAvailable(t: Test, tools: string[]): boolean {
  const problems: string[] = [];
  if (process.getuid?.() !== 0) problems.push("must run as root (it mounts overlays and boots containers)");
  const missing = tools.filter((tool) => spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0);
  if (missing.length > 0) problems.push(`missing tools: ${missing.join(", ")} (apt-get install ${APT})`);
  if (problems.length === 0) return true;
  const reason = `packaging tests cannot run: ${problems.join("; ")}`;
  if (process.env.LMD_SKIP_PACKAGING === "1") t.plan(0, `${reason} (LMD_SKIP_PACKAGING=1)`);
  else t.fail(`${reason}. Set LMD_SKIP_PACKAGING=1 to skip them on a developer machine.`);
  return false;
}

/**
 * Builds the packages with `npm run package` unless all of them are in dist/packages already
 * (run `npm run package` yourself after changing the code to test a fresh build): once per suite,
 * the GPU packages (~0.6 GB of GPU code that hardly compresses) at zstd's fastest level.
 */
export function ensurePackages(t: Test): boolean {
  if (ALL.every((f) => existsSync(f))) return true;
  const started = Date.now();
  const r = spawnSync("npm", ["run", "package", "--silent"], {
    cwd: REPO,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, LMD_PKG_FAST: "1" },
  });
  t.comment(`npm run package: exit ${r.status} in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  if (r.status !== 0 || !ALL.every((f) => existsSync(f))) {
    t.fail("npm run package failed", { stderr: `${r.stderr ?? ""}`.slice(-4000) });
    return false;
  }
  return true;
}

/** Runs the install-test script with `args`, synchronously. */
export function runInstallTest(args: string[], timeoutMs: number): { status: number | null; output: string } {
  const r = spawnSync("bash", [INSTALL_TEST, ...args], { cwd: REPO, encoding: "utf8", timeout: timeoutMs, stdio: ["ignore", "pipe", "pipe"] });
  return { status: r.status, output: `${r.stdout ?? ""}${r.stderr ?? ""}` };
}
