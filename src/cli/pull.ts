/** `lmd pull MODEL`: fetches a model from a registry, with progress bars (POST /api/pull). */
import { makeClient, runCommand, type CommandSpec } from "./common.js";
import { ProgressView } from "./progress.js";
import type { ProgressLine } from "./wire.js";

export const spec: CommandSpec = {
  usage: "lmd pull MODEL [--insecure]",
  summary: "Pull a model from a registry",
  minArgs: 1,
  maxArgs: 1,
  options: { insecure: { type: "boolean" } },
  optionHelp: ["    --insecure   plain http to the registry (no TLS; certificates are always verified)"],
  examples: ["lmd pull llama3.2", "lmd pull hf.co/user/repo:Q4_K_M", "lmd pull --insecure 127.0.0.1:5000/library/tiny:latest"],
};

export async function run(argv: string[]): Promise<void> {
  await runCommand(spec, argv, async ({ positionals: [model], values }) => {
    await transfer("/api/pull", { model, insecure: values.insecure === true, stream: true });
  });
}

/** Streams a pull or push and draws its progress; throws the stream's error, if any. */
export async function transfer(path: string, body: Record<string, unknown>): Promise<void> {
  const client = makeClient();
  const view = new ProgressView();
  try {
    for await (const line of client.stream<ProgressLine>("POST", path, body)) view.update(line);
  } finally {
    view.finish();
    await client.close();
  }
}
