/** `lmd stop MODEL`: unloads a model now (the unload form of generate: empty prompt, keep_alive 0). */
import { makeClient, runCommand, type CommandSpec } from "./common.js";

export const spec: CommandSpec = {
  usage: "lmd stop MODEL",
  summary: "Stop (unload) a running model",
  minArgs: 1,
  maxArgs: 1,
  examples: ["lmd stop llama3.2"],
};

export async function run(argv: string[]): Promise<void> {
  await runCommand(spec, argv, async ({ positionals: [model] }) => {
    const client = makeClient();
    await client.json("POST", "/api/generate", { model, prompt: "", keep_alive: 0, stream: false });
    await client.close();
  });
}
