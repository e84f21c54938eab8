/**
 * Preloaded into every test process (package.json, tap's `node-arg`), on its main thread.
 *
 * In a test file under test/unit/: the unit tier runs in parallel and in seconds because its tests
 * run no native code and start no processes, so a unit test that imports node-llama-cpp, opens a
 * native addon or starts a child process fails at once, saying where it belongs, instead of
 * quietly slowing the tier down. Worker threads are allowed (plain JavaScript in this process);
 * type-only imports are erased before they could be resolved.
 *
 * In every other test file: the tests import src/ (through tsx), but the processes they start
 * (runners, the daemon, the CLI) run the build in dist/. Starting a process on dist/src or
 * dist/native when dist/ was built from other sources than src/ holds now (scripts/src-stamp.mjs)
 * fails with "run npm run build", instead of testing yesterday's code.
 */
import childProcess from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { register, syncBuiltinESMExports } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { isMainThread } from "node:worker_threads";
import { srcHash, STAMP } from "../../scripts/src-stamp.mjs";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const STARTERS = ["fork", "spawn", "spawnSync", "exec", "execSync", "execFile", "execFileSync"];
const file = (process.argv[1] ?? "").split(path.sep).join("/");

/** Replaces child_process.`name` (and its promisified form) with `wrap(original)`, for ESM imports too. */
function replaceStarter(name, wrap) {
  const original = childProcess[name];
  const replaced = wrap(original);
  if (original[promisify.custom]) replaced[promisify.custom] = wrap(original[promisify.custom]);
  childProcess[name] = replaced;
}

function guardUnitTier() {
  const advice = `in the unit tier (${path.basename(file)}): move this test to test/native/ or test/integration/`;
  for (const name of STARTERS) {
    replaceStarter(name, () => () => {
      throw new Error(`child_process.${name} ${advice}`);
    });
  }
  process.dlopen = (module, filename) => {
    throw new Error(`a native addon (${filename}) ${advice}`);
  };
  const hooks = `
    let advice;
    export function initialize(data) { advice = data.advice; }
    export async function resolve(specifier, context, next) {
      if (/^(@node-llama-cpp\\/|node-llama-cpp(\\/|$))/.test(specifier)) throw new Error("importing " + specifier + " " + advice);
      return next(specifier, context);
    }`;
  register(`data:text/javascript,${encodeURIComponent(hooks)}`, { parentURL: import.meta.url, data: { advice } });
}

/** Why dist/ may not be run (built from other sources, or not built), or undefined; checked once. */
let staleness;
function distStaleness() {
  if (staleness === undefined) {
    const stamp = path.join(ROOT, STAMP);
    if (!existsSync(stamp)) staleness = "dist/ is not built (or not by npm run build): run npm run build";
    else if (readFileSync(stamp, "utf8").trim() !== srcHash(ROOT)) staleness = "dist/ is older than src/: run npm run build";
    else staleness = "";
  }
  return staleness || undefined;
}

/**
 * Throws `why`. The error may end as a failed model load whose words only a log sees, or in a test
 * that expects a failure: so it is also said on stderr, once, and the test file fails whatever
 * its assertions say.
 */
let refused = false;
function refuse(why) {
  if (!refused) console.error(`\n${path.basename(file)}: ${why}\n`);
  refused = true;
  process.exitCode = 1;
  throw new Error(why);
}

function guardDist() {
  const built = [path.join(ROOT, "dist/src/"), path.join(ROOT, "dist/native/")];
  const runsDist = (args) =>
    args.flat().some((a) => typeof a === "string" && built.some((dir) => a.includes(dir)));
  for (const name of STARTERS) {
    replaceStarter(name, (original) =>
      function (...args) {
        const stale = runsDist(args) ? distStaleness() : undefined;
        if (stale) refuse(stale);
        return original.apply(this, args);
      });
  }
}

if (isMainThread) {
  if (file.includes("/test/unit/")) guardUnitTier();
  else guardDist();
  syncBuiltinESMExports();
}
