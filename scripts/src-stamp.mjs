/**
 * The build's stamp of its sources: one SHA-256 over the path and content of every file under src/,
 * written to dist/src.sha256 by `npm run build` (run as a script) after tsc and the native build.
 * Tests that run dist/ in a child process (runners, the daemon, the CLI) compare it with the
 * sources they were given (test/helpers/tier-guard.mjs) and refuse to test a stale build. A hash
 * of the contents, not file times: checkouts, rebases and copies to another machine rewrite times
 * without changing what was built.
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The stamp's file, relative to the repository root. */
export const STAMP = "dist/src.sha256";

/** The hash of every file under `root`/src, in a fixed order. */
export function srcHash(root) {
  const hash = createHash("sha256");
  const files = readdirSync(path.join(root, "src"), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(root, path.join(e.parentPath ?? e.path, e.name)).split(path.sep).join("/"))
    .sort();
  for (const file of files) hash.update(file).update("\0").update(readFileSync(path.join(root, file))).update("\0");
  return hash.digest("hex");
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
  writeFileSync(path.join(root, STAMP), `${srcHash(root)}\n`);
}
