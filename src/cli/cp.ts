/** `lmd cp SOURCE DESTINATION` (POST /api/copy). */
import { makeClient, out, runCommand, type CommandSpec } from "./common.js";

export const spec: CommandSpec = {
  usage: "lmd cp SOURCE DESTINATION",
  summary: "Copy a model under a new name",
  minArgs: 2,
  maxArgs: 2,
  examples: ["lmd cp llama3.2 my-llama"],
};

export async function run(argv: string[]): Promise<void> {
  await runCommand(spec, argv, async ({ positionals: [source, destination] }) => {
    const client = makeClient();
    await client.json("POST", "/api/copy", { source, destination });
    await out(`copied '${source}' to '${destination}'\n`);
    await client.close();
  });
}
