/**
 * The unit tier's guard (test/helpers/tier-guard.mjs): a test file under test/unit/ that imports
 * node-llama-cpp, opens a native addon or starts a child process fails with the tier it belongs in.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import t from "tap";

const advice = /in the unit tier \(tier-guard\.test\.ts\): move this test to test\/native\/ or test\/integration\//;

t.test("importing node-llama-cpp or one of its packages is refused", async (t) => {
  await t.rejects(import("node-llama-cpp"), { message: /^importing node-llama-cpp in the unit tier/ });
  await t.rejects(import("node-llama-cpp/dist/index.js"), { message: advice });
  await t.rejects(import("@node-llama-cpp/linux-x64"), { message: /^importing @node-llama-cpp\/linux-x64 in the unit tier/ });
});

t.test("every way of starting a child process is refused", async (t) => {
  const cp = await import("node:child_process");
  t.throws(() => cp.fork("x.js"), { message: /^child_process\.fork in the unit tier/ });
  t.throws(() => cp.spawn("true"), { message: /^child_process\.spawn in the unit tier/ });
  t.throws(() => cp.spawnSync("true"), { message: /^child_process\.spawnSync / });
  t.throws(() => cp.exec("true"), { message: /^child_process\.exec / });
  t.throws(() => cp.execSync("true"), { message: /^child_process\.execSync / });
  t.throws(() => cp.execFile("true"), { message: /^child_process\.execFile / });
  t.throws(() => cp.execFileSync("true"), { message: advice });
  const { default: cjs } = await import("node:child_process");
  t.throws(() => cjs.spawn("true"), { message: /^child_process\.spawn / }, "the default export too");
});

t.test("opening a native addon is refused before the file is read", async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lmd-tier-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const addon = path.join(dir, "fake.node");
  writeFileSync(addon, "not an addon");
  t.throws(() => createRequire(import.meta.url)(addon), { message: /^a native addon \(.*fake\.node\) in the unit tier/ });
});

t.test("plain modules load as usual", async (t) => {
  const { loadConfig } = await import("../../src/config.js");
  t.equal(typeof loadConfig, "function");
});
