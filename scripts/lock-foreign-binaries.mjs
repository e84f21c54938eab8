#!/usr/bin/env node
// The npm registry reachable here serves only the Linux builds of node-llama-cpp's binary packages
// (@node-llama-cpp/mac-*, win-*, linux-riscv64 answer 404). npm then writes a package-lock.json
// without them, which `npm ci` refuses as "out of sync". This script records each missing optional
// binary package in the lock with its os/cpu, so `npm ci` sees the lock in sync and skips them on
// this platform without fetching anything. Run it after every `npm install` that rewrites the lock.
import { readFileSync, writeFileSync } from "node:fs";

const lockFile = new URL("../package-lock.json", import.meta.url);
const lock = JSON.parse(readFileSync(lockFile, "utf8"));
const root = lock.packages["node_modules/node-llama-cpp"];
if (!root) throw new Error("node-llama-cpp is not in package-lock.json");
const platform = (name) => {
  const [, os, arch] = /^@node-llama-cpp\/(mac|win|linux)-(x64|arm64|armv7l|riscv64)/.exec(name) ?? [];
  return { os: [{ mac: "darwin", win: "win32", linux: "linux" }[os]], cpu: [{ armv7l: "arm" }[arch] ?? arch] };
};
let added = 0;
for (const [name, version] of Object.entries(root.optionalDependencies ?? {})) {
  const key = `node_modules/${name}`;
  if (lock.packages[key]) continue;
  lock.packages[key] = { version, ...platform(name), license: "MIT", optional: true };
  added++;
}
writeFileSync(lockFile, JSON.stringify(lock, null, 2) + "\n");
console.log(`package-lock.json: recorded ${added} foreign-platform binary package(s)`);
