/**
 * Docs a newcomer can run: every ```sh block in README.md and docs/*.md made
 * only of `curl ... http://127.0.0.1:11434/...` commands is run, in document order, against a fresh
 * daemon that serves the built-in demo model (as `npm start` does), with curl failing on any HTTP
 * error status. Examples that need something else (a registry, a second host) are ```text blocks.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";
import { forkDaemon } from "../helpers/process.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const DEFAULT = "http://127.0.0.1:11434";

interface Example {
  file: string;
  line: number;
  script: string;
}

/** The runnable examples of one Markdown file: ```sh blocks whose commands are all curl to the default address. */
function examples(file: string): Example[] {
  const out: Example[] = [];
  const lines = readFileSync(path.join(root, file), "utf8").split("\n");
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]?.trim() !== "```sh") continue;
    const start = i + 1;
    const body: string[] = [];
    for (i++; i < lines.length && lines[i]?.trim() !== "```"; i++) body.push(lines[i] ?? "");
    const commands = body.join("\n").replace(/\\\n/g, " ").split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("#"));
    if (commands.length > 0 && commands.every((c) => c.startsWith("curl ") && c.includes(`${DEFAULT}/`)))
      out.push({ file, line: start, script: commands.join("\n") });
  }
  return out;
}

t.test("every curl example in the docs runs against a fresh daemon", async (t) => {
  const files = ["README.md", ...readdirSync(path.join(root, "docs")).filter((f) => f.endsWith(".md")).sort().map((f) => `docs/${f}`)];
  const all = files.flatMap(examples);
  t.ok(all.length >= 20, `found ${all.length} runnable examples`);
  const daemon = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: path.join(t.testdir(), "models") });
  for (const ex of all) {
    const script = `set -e\ncurl() { command curl -sS --fail-with-body --max-time 120 "$@"; }\n${ex.script.replaceAll(DEFAULT, daemon.url)}\n`;
    try {
      execFileSync("bash", ["-c", script], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 180_000 });
      t.pass(`${ex.file}:${ex.line} runs`);
    } catch (err) {
      const e = err as { status?: number; stdout?: string; stderr?: string };
      t.fail(
        `${ex.file}:${ex.line} failed (exit ${e.status}): ${(e.stderr ?? "").slice(0, 300)} ${(e.stdout ?? "").slice(0, 300)}\n${ex.script.slice(0, 300)}`,
      );
    }
  }
});

t.test("the README lists every page of docs/, and no page points at files a user does not have", async (t) => {
  const readme = readFileSync(path.join(root, "README.md"), "utf8");
  for (const page of readdirSync(path.join(root, "docs")).filter((f) => f.endsWith(".md"))) {
    t.ok(readme.includes(`(docs/${page})`), `README links docs/${page}`);
    const text = readFileSync(path.join(root, "docs", page), "utf8");
    t.notMatch(text, /\.\.\/shared\/|DESIGN §|\(seed: /, `docs/${page} names no file outside the project`);
  }
  t.notMatch(readme, /\.\.\/shared\/|DESIGN §|\(seed: /, "README names no file outside the project");
});
