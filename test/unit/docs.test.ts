/**
 * docs/ stays true: the configuration table matches the code's variables and defaults, and the
 * error table lists every message the error classes produce.
 */
import { readFile } from "node:fs/promises";
import t from "tap";
import { loadConfig, VARIABLES } from "../../src/config.js";
import * as errors from "../../src/errors.js";
import { BlobQuotaError } from "../../src/store/unreferenced.js";

const doc = (name: string) => readFile(new URL(`../../docs/${name}`, import.meta.url), "utf8");

t.test("docs/configuration.md lists every variable with its default", async (t) => {
  const text = await doc("configuration.md");
  const rows = new Map<string, string>();
  for (const m of text.matchAll(/^\| `(SERVICE_[A-Z_]+)` \| ([^|]+) \|/gm)) rows.set(m[1]!, m[2]!.trim());
  t.same([...rows.keys()].sort(), Object.keys(VARIABLES).sort(), "the same variables");
  for (const [name, spec] of Object.entries(VARIABLES)) {
    const documented = rows.get(name) ?? "";
    if (spec.default === "") t.match(documented, /^\(none\)$|^\(auto\)$|^`~\/\.lmd\/models`$/, `${name} has no fixed default`);
    else t.equal(documented, `\`${spec.default}\``, `${name} default`);
  }
  // The documented defaults are the ones the code applies.
  const c = loadConfig({});
  t.equal(c.keepAliveMs, 300_000);
  t.equal(c.maxBodyBytes, 8 * 1024 * 1024);
});

t.test("docs/errors.md lists every message shape of the error classes", async (t) => {
  const text = await doc("errors.md");
  // The status is the one the door gives (toErrorResponse): store errors carry a kind, not a status.
  const answer = (e: Error, message = e.message): [number, string] => [errors.toErrorResponse(e).status, message];
  const samples: [number, string][] = [
    answer(new errors.ModelNotFoundError("<name>")),
    answer(new errors.MethodNotAllowedError("<M>", "<path>", [])),
    answer(new errors.ModelBusyError("<name>")),
    answer(new errors.BodyTooLargeError(0), new errors.BodyTooLargeError(0).message.replace("0", "<n>")),
    answer(new errors.ModelLoadError("<name>", "<reason>")),
    answer(new errors.ModelRunError("<detail>")),
    answer(new errors.ServiceBusyError()),
    answer(new errors.ShuttingDownError()),
    answer(new errors.NoSpaceError()),
    answer(new errors.ModelNotFoundError("<name>", false)),
    answer(new errors.StoreNotWritableError("<reason>")),
    answer(new errors.BrokenModelError("<name>", "<reason>")),
    answer(new BlobQuotaError(0), new BlobQuotaError(0).message.replace("(0 bytes)", "(<n> bytes)")),
    [400, "prompt is required"],
    [400, "model is required"],
    [400, "missing request body"],
  ];
  for (const [status, message] of samples) {
    t.ok(text.includes(`| ${status} |`) && text.includes(message), `${status} ${message}`);
  }
});

t.test("docs/configuration.md lists every Ollama alias", async (t) => {
  const { ALIASES } = await import("../../src/config.js");
  const text = await doc("configuration.md");
  const rows = [...text.matchAll(/^\| `(OLLAMA_[A-Z_]+)` \| `(SERVICE_[A-Z_]+)`/gm)].map((m) => [m[1], m[2]]);
  t.same(rows.sort(), Object.entries(ALIASES).map(([a, { variable }]) => [a, variable]).sort());
});
