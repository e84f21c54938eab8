/**
 * llama.cpp's source as node-llama-cpp ships it (its gitRelease.bundle): real tokenizers
 * (models/ggml-vocab-*.gguf) and chat templates for tests. Cloned once into the temp directory
 * and reused by every later test run.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { rename, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const BUNDLE = fileURLToPath(new URL("../../node_modules/node-llama-cpp/llama/gitRelease.bundle", import.meta.url));
let cached: Promise<string> | undefined;

/** The directory of a checkout of llama.cpp's source (cloned on first use). */
export function llamaSrc(): Promise<string> {
  cached ??= clone();
  return cached;
}

async function clone(): Promise<string> {
  const dir = path.join(os.tmpdir(), `lmd-llama-src-${process.getuid?.() ?? "u"}`);
  if (existsSync(path.join(dir, "models"))) return dir;
  // Clone beside the target and rename: parallel test processes never see a half-made checkout.
  const tmp = `${dir}.${process.pid}.tmp`;
  await rm(tmp, { recursive: true, force: true });
  await run("git", ["clone", "--quiet", BUNDLE, tmp], { maxBuffer: 1 << 24 });
  await rename(tmp, dir).catch(async (err: NodeJS.ErrnoException) => {
    await rm(tmp, { recursive: true, force: true });
    if (!existsSync(path.join(dir, "models"))) throw err;
  });
  return dir;
}
