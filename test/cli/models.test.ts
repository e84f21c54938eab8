/**
 * The model commands as a user runs them, against a real daemon and a loopback registry
 * (test/helpers/registry.ts): `pull` in a terminal draws a progress bar and ends with `success`;
 * `create -f Modelfile` uploads the local GGUF as a blob; `list`, `show`, `cp`, `rm`, `ps`, `push`.
 */
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import t from "tap";
import { startDaemon } from "../helpers/daemon.js";
import { testGguf } from "../helpers/models.js";
import { sha256, startTestRegistry } from "../helpers/registry.js";
import { lmd, terminal, terminalSkip } from "./cli.js";

const MODEL = "application/vnd.ollama.image.model";

const reg = await startTestRegistry(t);
const gguf = await readFile(await testGguf());
reg.addModel("library/tiny", "latest", [{ mediaType: MODEL, data: gguf }]);
const { url } = await startDaemon(t, { models: [] });
const pulled = `${reg.host}/library/tiny:latest`;

t.test("lmd pull in a terminal: a progress bar, then success", { skip: terminalSkip }, async (t) => {
  const term = await terminal(t, url, ["pull", "--insecure", pulled]);
  const screen = await term.waitFor(/^success$/m, 120_000);
  t.match(screen, /^pulling manifest$/m);
  const short = sha256(gguf).slice(7, 19);
  t.match(screen, new RegExp(`^pulling ${short}: 100% ▕█+▏ [\\d.]+ [KMG]?B/[\\d.]+ [KMG]?B$`, "m"), "a full bar for the model layer");
  t.match(screen, /^writing manifest$/m);
  for (let i = 0; i < 100 && (await term.exitStatus()) === undefined; i++) await new Promise((r) => setTimeout(r, 100));
  t.equal(await term.exitStatus(), 0);
});

t.test("lmd list shows the pulled model in an aligned table", async (t) => {
  const r = await lmd(url, ["list"]);
  t.equal(r.code, 0, r.stderr);
  const [header, row] = r.stdout.split("\n");
  t.match(header, /^NAME +ID +SIZE +MODIFIED$/);
  t.match(row, new RegExp(`^${pulled.replace(/[.]/g, "\\.")} +[0-9a-f]{12} +[\\d.]+ [KMG]?B +`));
  t.equal(header!.indexOf("ID"), row!.search(/ [0-9a-f]{12} /) + 1, "columns line up");
});

t.test("create from a Modelfile with a local GGUF, then show, cp, rm", async (t) => {
  const dir = t.testdir({ "Modelfile": "" });
  await writeFile(path.join(dir, "model.gguf"), gguf);
  await writeFile(
    path.join(dir, "Modelfile"),
    'FROM ./model.gguf\nPARAMETER temperature 0.3\nPARAMETER stop "<end>"\nSYSTEM """You are terse.\nVery terse."""\n',
  );
  const c = await lmd(url, ["create", "mine", "-f", path.join(dir, "Modelfile")]);
  t.equal(c.code, 0, c.stderr);
  t.match(c.stderr, /^success$/m);

  const sys = await lmd(url, ["show", "mine", "--system"]);
  t.equal(sys.stdout, "You are terse.\nVery terse.\n");
  const info = await lmd(url, ["show", "mine"]);
  t.equal(info.code, 0, info.stderr);
  t.match(info.stdout, /^ {2}Model\n {4}architecture +llama$/m);
  t.match(info.stdout, /^ {2}Parameters\n[\s\S]*temperature +0\.3/m);
  const mf = await lmd(url, ["show", "mine", "--modelfile"]);
  t.match(mf.stdout, /^FROM /m);

  t.equal((await lmd(url, ["cp", "mine", "mine2"])).stdout, "copied 'mine' to 'mine2'\n");
  t.match((await lmd(url, ["list"])).stdout, /^mine2:latest /m);
  t.equal((await lmd(url, ["rm", "mine2"])).stdout, "deleted 'mine2'\n");
  t.notMatch((await lmd(url, ["list"])).stdout, /^mine2:latest /m);
  const missing = await lmd(url, ["rm", "mine2"]);
  t.equal(missing.code, 1);
  t.match(missing.stderr, /^Error: model 'mine2' not found/);
});

t.test("DRAFT ./file.gguf in a Modelfile becomes the model's draft layer (Ollama's form); DRAFT <name> a model in the store", async (t) => {
  const dir = t.testdir({ "Modelfile": "" });
  await writeFile(path.join(dir, "draft.gguf"), gguf);
  await writeFile(path.join(dir, "Modelfile"), "FROM mine\nDRAFT ./draft.gguf\nPARAMETER draft_num_predict 2\n");
  const c = await lmd(url, ["create", "drafted", "-f", path.join(dir, "Modelfile")]);
  t.equal(c.code, 0, c.stderr);
  const mf = (await lmd(url, ["show", "drafted", "--modelfile"])).stdout;
  t.match(mf, /^DRAFT \S+\/blobs\/sha256-[0-9a-f]{64}$/m, "a layer, shown as its blob");
  t.match(mf, /^PARAMETER draft_num_predict 2$/m);
  await writeFile(path.join(dir, "Modelfile"), "FROM mine\nDRAFT mine\n");
  t.equal((await lmd(url, ["create", "named", "-f", path.join(dir, "Modelfile")])).code, 0);
  t.match((await lmd(url, ["show", "named", "--modelfile"])).stdout, /^DRAFT mine$/m);
});

t.test("a Modelfile mistake is reported with its line, exit 1", async (t) => {
  const dir = t.testdir({ "Modelfile": "FROM tiny\nPARAMETER temprature 1\n" });
  const r = await lmd(url, ["create", "bad", "-f", path.join(dir, "Modelfile")]);
  t.equal(r.code, 1);
  t.equal(r.stderr, "Error: line 2: unknown parameter 'temprature'\n");
});

// GET /api/ps belongs to another issue; until it lands this test is skipped, not faked.
const psMissing = (await fetch(`${url}/api/ps`)).status === 404;
t.test("lmd ps prints its table", { skip: psMissing ? "GET /api/ps is not implemented yet" : false }, async (t) => {
  const r = await lmd(url, ["ps"]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /^NAME +ID +SIZE +PROCESSOR +CONTEXT +UNTIL\n/);
});

t.test("lmd push to the loopback registry ends with success", async (t) => {
  const cp = await lmd(url, ["cp", "mine", `${reg.host}/me/mine:latest`]);
  t.equal(cp.code, 0, cp.stderr);
  const p = await lmd(url, ["push", "--insecure", `${reg.host}/me/mine:latest`]);
  t.equal(p.code, 0, p.stderr);
  t.match(p.stderr, /^success$/m);
  t.ok(reg.manifests.has("me/mine:latest"), "the registry holds the manifest");
});
