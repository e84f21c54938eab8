/** `lmd list` / `lmd ls`: the models in the store, as an aligned table (GET /api/tags). */
import { makeClient, out, runCommand, humanSize, humanTime, shortId, table, type CommandSpec } from "./common.js";
import type { TagsResponse } from "./wire.js";

export const spec: CommandSpec = {
  usage: "lmd list [PREFIX]   (alias: lmd ls)",
  summary: "List models in the store",
  maxArgs: 1,
  examples: ["lmd list", "lmd ls llama"],
};

export async function run(argv: string[]): Promise<void> {
  await runCommand(spec, argv, async ({ positionals }) => {
    const client = makeClient();
    const tags = await client.json<TagsResponse>("GET", "/api/tags");
    const prefix = positionals[0]?.toLowerCase();
    const rows = (tags.models ?? [])
      .filter((m) => prefix === undefined || m.name.toLowerCase().startsWith(prefix))
      .map((m) => [m.name, shortId(m.digest), humanSize(m.size), humanTime(m.modified_at)]);
    await out(table(["NAME", "ID", "SIZE", "MODIFIED"], rows));
    await client.close();
  });
}
