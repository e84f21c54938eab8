/**
 * The structured-output examples of README.md and docs/api.md, against the demo model: the docs say
 * a bounded schema makes even random text close its JSON, so each answer must parse and match the
 * schema the example sent (ajv), every time.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv } from "ajv";
import t from "tap";
import { forkDaemon } from "../helpers/process.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const DEFAULT = "http://127.0.0.1:11434";

/** The one-line curl examples of a page that send a schema as `format`. */
function examples(file: string): string[] {
  const text = readFileSync(path.join(root, file), "utf8");
  return [...text.matchAll(/^```sh\n(curl [^\n]*"format": \{[^\n]*)\n```$/gm)].map((m) => m[1]!);
}

t.test("the bounded-schema examples answer valid JSON of their schema with the demo model", async (t) => {
  const all = [...examples("README.md"), ...examples("docs/api.md")];
  t.equal(all.length, 2, "one in the README, one in docs/api.md");
  const daemon = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: path.join(t.testdir(), "models") });
  const ajv = new Ajv();
  for (const example of all) {
    const body = /-d '(.*)'$/.exec(example)?.[1];
    const request = JSON.parse(body ?? "null") as { format: object; messages?: unknown };
    // maxLength is left to the length check below: a byte the model writes that is no whole UTF-8
    // character reads back as U+FFFD, so the text can hold more characters than the grammar counted.
    const shape = JSON.parse(JSON.stringify(request.format, (k, v: unknown) => (k === "maxLength" ? undefined : v))) as object;
    const validate = ajv.compile(shape);
    t.ok(
      Object.values((request.format as { properties: Record<string, { maxLength?: number; enum?: unknown[] }> }).properties).every(
        (p) => p.maxLength !== undefined || p.enum !== undefined,
      ),
      "every string is bounded",
    );
    // Different seeds give different random text: each must close.
    for (const seed of [1, 2, 3, 4, 5]) {
      const withSeed = JSON.stringify({ ...request, options: { seed } });
      const out = execFileSync(
        "curl",
        ["-sS", "--fail-with-body", "--max-time", "120", example.replace(/^curl (\S+) .*$/, "$1").replace(DEFAULT, daemon.url), "-d", withSeed],
        { encoding: "utf8" },
      );
      const answer = JSON.parse(out) as { response?: string; message?: { content: string }; done_reason: string };
      const text = request.messages ? answer.message?.content ?? "" : answer.response ?? "";
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        t.fail(`seed ${seed}: not JSON (${answer.done_reason}): ${text.slice(0, 200)}`);
        continue;
      }
      t.ok(validate(value), `seed ${seed}: ${text} has the schema's shape ${JSON.stringify(validate.errors ?? [])}`);
      for (const [key, p] of Object.entries((request.format as { properties: Record<string, { maxLength?: number }> }).properties)) {
        const v = (value as Record<string, unknown>)[key];
        if (p.maxLength === undefined || typeof v !== "string") continue;
        const whole = [...v].filter((c) => c !== "\uFFFD").length;
        t.ok(whole <= p.maxLength, `seed ${seed}: ${key} has at most ${p.maxLength} whole characters (${whole})`);
      }
      t.equal(answer.done_reason, "stop", `seed ${seed}: the model ended it, no limit cut it`);
    }
  }
});
