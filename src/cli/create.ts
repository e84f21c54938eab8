/**
 * `lmd create MODEL -f Modelfile`: parses the Modelfile, uploads the local files it names (FROM a
 * GGUF file, ADAPTER files) through /api/blobs, then calls /api/create with their digests. The
 * daemon never reads a path named by a request (a client may be on another host), so files always
 * travel as blobs.
 */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { Client } from "../api/client.js";
import { parseModelfile } from "../modelfile/modelfile.js";
import { makeClient, runCommand, type CommandSpec } from "./common.js";
import { ProgressView } from "./progress.js";
import type { ProgressLine } from "./wire.js";

export const spec: CommandSpec = {
  usage: "lmd create MODEL [-f Modelfile]",
  summary: "Create a model from a Modelfile",
  minArgs: 1,
  maxArgs: 1,
  options: { file: { type: "string", short: "f" } },
  optionHelp: ["-f, --file FILE   the Modelfile (default: ./Modelfile)"],
  examples: ["lmd create my-model -f ./Modelfile", "printf 'FROM ./model.gguf\\nPARAMETER temperature 0.2\\n' > Modelfile && lmd create my-model"],
};

export async function run(argv: string[]): Promise<void> {
  await runCommand(spec, argv, async ({ positionals: [model], values }) => {
    const file = path.resolve(typeof values.file === "string" ? values.file : "Modelfile");
    const mf = parseModelfile(await readFile(file, "utf8").catch((err: NodeJS.ErrnoException) => {
      throw new Error(err.code === "ENOENT" ? `no Modelfile at ${file} (use -f FILE)` : `cannot read ${file}: ${err.message}`);
    }));
    const base = path.dirname(file);
    const client = makeClient();
    const view = new ProgressView();
    try {
      const body: Record<string, unknown> = { model, stream: true };
      const fromPath = await localFile(mf.from, base);
      if (fromPath !== undefined) body.files = { [path.basename(fromPath)]: await upload(client, view, fromPath) };
      else body.from = mf.from;
      if (mf.adapters.length > 0) {
        const adapters: Record<string, string> = {};
        for (const a of mf.adapters) {
          const p = await localFile(a, base);
          if (p === undefined) throw new Error(`adapter file '${a}' not found`);
          adapters[path.basename(p)] = await upload(client, view, p);
        }
        body.adapters = adapters;
      }
      if (mf.template !== undefined) body.template = mf.template;
      if (mf.renderer !== undefined) body.renderer = mf.renderer;
      if (mf.parser !== undefined) body.parser = mf.parser;
      if (mf.system !== undefined) body.system = mf.system;
      // DRAFT: a GGUF file (Ollama's form) is uploaded as the draft layer; anything else names a model in the store (lmd's).
      const { draft, ...parameters } = mf.parameters;
      const draftPath = typeof draft === "string" ? await localFile(draft, base) : undefined;
      if (draftPath !== undefined) body.draft_files = { [path.basename(draftPath)]: await upload(client, view, draftPath) };
      else if (draft !== undefined) parameters.draft = draft;
      if (Object.keys(parameters).length > 0) body.parameters = parameters;
      if (mf.messages.length > 0) body.messages = mf.messages;
      if (mf.license.length > 0) body.license = mf.license.length === 1 ? mf.license[0] : mf.license;
      for await (const line of client.stream<ProgressLine>("POST", "/api/create", body)) view.update(line);
    } finally {
      view.finish();
      await client.close();
    }
  });
}

/** The absolute path when `ref` names an existing file (relative to the Modelfile), else undefined (a model name). */
async function localFile(ref: string, base: string): Promise<string | undefined> {
  const expanded = ref.startsWith("~/") ? path.join(os.homedir(), ref.slice(2)) : ref;
  const candidate = path.resolve(base, expanded);
  const st = await stat(candidate).catch(() => undefined);
  if (st?.isDirectory()) throw new Error(`'${ref}' is a directory; FROM, ADAPTER and DRAFT take a GGUF file`);
  if (st?.isFile()) return candidate;
  if (/^(\.{1,2}\/|\/|~\/)/.test(ref) || /\.gguf$/i.test(ref)) throw new Error(`file '${ref}' not found`);
  return undefined;
}

/** Uploads a file as a blob unless the daemon has it already; returns its digest. */
export async function upload(client: Client, view: ProgressView, file: string): Promise<string> {
  view.update({ status: "gathering model components" });
  const hash = createHash("sha256");
  await pipeline(createReadStream(file), hash);
  const digest = `sha256:${hash.digest("hex")}`;
  if ((await client.status("HEAD", `/api/blobs/${digest}`)) === 200) {
    view.update({ status: `using existing layer ${digest}` });
    return digest;
  }
  const total = (await stat(file)).size;
  const status = `copying file ${digest}`;
  await client.json("POST", `/api/blobs/${digest}`, undefined, {
    headers: { "content-type": "application/octet-stream", "content-length": String(total) },
    rawBody: () => {
      let completed = 0;
      const counter = new Transform({
        transform(chunk: Buffer, _enc, done) {
          completed += chunk.length;
          view.update({ status, digest, total, completed });
          done(null, chunk);
        },
      });
      return createReadStream(file).pipe(counter);
    },
  });
  view.update({ status, digest, total, completed: total });
  return digest;
}
