/**
 * Files of llama.cpp's source without a checkout: node-llama-cpp ships that source as a git bundle
 * (llama/gitRelease.bundle), whose models/ holds the vocabulary-only GGUFs (ggml-vocab-*.gguf) and
 * models/templates/ the chat templates. A file is read out of it once with git and kept in a cache
 * directory. A script tool (scripts/make-model): nothing in the daemon uses it.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The bundle inside the installed node-llama-cpp package. */
export function bundlePath(): string {
  const entry = createRequire(import.meta.url).resolve("node-llama-cpp"); // <package>/dist/index.js
  return path.join(path.dirname(path.dirname(entry)), "llama", "gitRelease.bundle");
}

/** Where files read from the bundle are kept: $XDG_CACHE_HOME/lmd/llama.cpp, else ~/.cache/lmd/llama.cpp. */
function cacheDir(): string {
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache");
  return path.join(base, "lmd", "llama.cpp");
}

/**
 * The path of `file` (relative to llama.cpp's source root, e.g. `models/ggml-vocab-bert-bge.gguf`)
 * read out of node-llama-cpp's bundle. The first call clones the bundle (bare) into the
 * cache; later calls read from that clone, and a file read once is reused.
 */
export async function bundledFile(file: string): Promise<string> {
  const dir = cacheDir();
  const out = path.join(dir, "files", file);
  if (existsSync(out)) return out;
  const bundle = bundlePath();
  if (!existsSync(bundle)) throw new Error(`llama.cpp's source is not bundled here (no ${bundle}); give --llama-src DIR (a llama.cpp checkout)`);
  const repo = path.join(dir, "source.git");
  if (!existsSync(repo)) {
    await mkdir(dir, { recursive: true });
    // Clone beside the target and rename: a parallel run never sees a half-made clone.
    const tmp = `${repo}.${process.pid}.tmp`;
    await rm(tmp, { recursive: true, force: true });
    await git(["clone", "--bare", "--quiet", bundle, tmp]);
    await rename(tmp, repo).catch(async (err: NodeJS.ErrnoException) => {
      await rm(tmp, { recursive: true, force: true });
      if (!existsSync(repo)) throw err;
    });
  }
  let data: Buffer;
  try {
    data = (await run("git", ["--git-dir", repo, "show", `HEAD:${file}`], { encoding: "buffer", maxBuffer: 1 << 28 })).stdout;
  } catch {
    throw new Error(`llama.cpp's source has no ${file} (node-llama-cpp's bundle at ${bundle})`);
  }
  await mkdir(path.dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  await writeFile(tmp, data);
  await rename(tmp, out);
  return out;
}

async function git(args: string[]): Promise<void> {
  try {
    await run("git", args, { maxBuffer: 1 << 24 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT")
      throw new Error("reading llama.cpp's bundled source needs git (apt-get install git), or give --llama-src DIR", { cause: err });
    throw err;
  }
}
