/**
 * Tests that start dist/ in a child process refuse a stale build (test/helpers/tier-guard.mjs,
 * scripts/src-stamp.mjs). Run on a small copy of the layout (src/, dist/, the stamp script, the
 * guard), so that this repository's own build is never touched.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { appendFileSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const root = mkdtempSync(path.join(os.tmpdir(), "lmd-stale-dist-"));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
for (const dir of ["scripts", "test/helpers", "test/integration", "src/runner", "dist/src/runner"]) mkdirSync(path.join(root, dir), { recursive: true });
for (const file of ["scripts/src-stamp.mjs", "test/helpers/tier-guard.mjs"]) copyFileSync(path.join(repo, file), path.join(root, file));
writeFileSync(path.join(root, "src/runner/child.ts"), "export const x: number = 1;\n");
writeFileSync(path.join(root, "dist/src/runner/child.js"), "console.log('the build ran');\n");

// A test file of the integration tier: starts the built child four ways, and a process outside dist/.
const probe = path.join(root, "test/integration/probe.mjs");
writeFileSync(probe, `
import { execFile, execFileSync, fork, spawnSync } from "node:child_process";
import { promisify } from "node:util";
const child = ${JSON.stringify(path.join(root, "dist/src/runner/child.js"))};
const said = [];
const attempt = async (name, start) => {
  try { said.push(name + ": " + (await start()).toString().trim()); } catch (e) { said.push(name + ": " + e.message); }
};
await attempt("fork", () =>
  new Promise((resolve, reject) => fork(child, [], { stdio: "ignore" }).once("exit", (code) => resolve("exit " + code)).once("error", reject)));
await attempt("spawnSync", () => spawnSync(process.execPath, [child]).stdout);
await attempt("execFileSync", () => execFileSync(process.execPath, [child]));
await attempt("execFile (promisified)", async () => (await promisify(execFile)(process.execPath, [child])).stdout);
await attempt("outside dist", () => execFileSync(process.execPath, ["-e", "console.log('not the build')"]));
console.log(JSON.stringify(said));
`);
/** What the probe's starts said; a refusal is also said once on stderr and fails the probe (exit 1). */
let last: { status: number | null; stderr: string } = { status: null, stderr: "" };
const run = (): string[] => {
  const out = spawnSync(process.execPath, [`--import=${path.join(root, "test/helpers/tier-guard.mjs")}`, probe], { encoding: "utf8" });
  last = { status: out.status, stderr: out.stderr };
  return JSON.parse(out.stdout) as string[];
};
const stamp = () => execFileSync(process.execPath, [path.join(root, "scripts/src-stamp.mjs")]);
const refused = (said: string) => ["fork", "spawnSync", "execFileSync", "execFile (promisified)"].map((name) => `${name}: ${said}`);

t.test("never stamped (built with tsc alone, or not at all): refused", async (t) => {
  t.same(run(), [...refused("dist/ is not built (or not by npm run build): run npm run build"), "outside dist: not the build"]);
  t.equal(last.status, 1, "the test file fails, whatever it made of the errors");
  t.equal(last.stderr, "\nprobe.mjs: dist/ is not built (or not by npm run build): run npm run build\n\n", "said once on stderr");
});

t.test("stamped from the sources there are now: runs", async (t) => {
  stamp();
  t.same(run(), [
    "fork: exit 0",
    "spawnSync: the build ran",
    "execFileSync: the build ran",
    "execFile (promisified): the build ran",
    "outside dist: not the build",
  ]);
  t.same(last, { status: 0, stderr: "" }, "nothing refused");
});

t.test("a source changed after the build: refused until the next build", async (t) => {
  appendFileSync(path.join(root, "src/runner/child.ts"), "export const y = 2;\n");
  t.same(run(), [...refused("dist/ is older than src/: run npm run build"), "outside dist: not the build"]);
  t.equal(last.status, 1);
  stamp();
  t.same(run()[1], "spawnSync: the build ran", "built again");
});

t.test("a source added or removed changes the stamp too", async (t) => {
  writeFileSync(path.join(root, "src/runner/extra.ts"), "");
  t.same(run()[2], "execFileSync: dist/ is older than src/: run npm run build", "added");
  stamp();
  rmSync(path.join(root, "src/runner/extra.ts"));
  t.same(run()[2], "execFileSync: dist/ is older than src/: run npm run build", "removed");
});
