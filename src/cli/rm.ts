/** `lmd rm MODEL...` (DELETE /api/delete, one call per model). */
import { makeClient, out, runCommand, type CommandSpec } from "./common.js";

export const spec: CommandSpec = {
  usage: "lmd rm MODEL [MODEL...]",
  summary: "Remove one or more models from the store",
  minArgs: 1,
  examples: ["lmd rm my-llama", "lmd rm a b c"],
};

export async function run(argv: string[]): Promise<void> {
  await runCommand(spec, argv, async ({ positionals }) => {
    const client = makeClient();
    for (const model of positionals) {
      await client.json("DELETE", "/api/delete", { model });
      await out(`deleted '${model}'\n`);
    }
    await client.close();
  });
}
