/** `lmd push MODEL`: uploads a model to a registry, with progress bars (POST /api/push). */
import { runCommand, type CommandSpec } from "./common.js";
import { transfer } from "./pull.js";

export const spec: CommandSpec = {
  usage: "lmd push MODEL [--insecure]",
  summary: "Push a model to a registry",
  minArgs: 1,
  maxArgs: 1,
  options: { insecure: { type: "boolean" } },
  optionHelp: ["    --insecure   plain http to the registry (no TLS; certificates are always verified)"],
  examples: ["lmd push 127.0.0.1:5000/me/my-model:latest --insecure"],
};

export async function run(argv: string[]): Promise<void> {
  await runCommand(spec, argv, async ({ positionals: [model], values }) => {
    await transfer("/api/push", { model, insecure: values.insecure === true, stream: true });
  });
}
