/** `lmd version`: the server's version when one answers, and the client's (as Ollama prints them). */
import { makeClient, out, runCommand, type CommandSpec } from "./common.js";
import type { VersionResponse } from "../api/types.js";
import { VERSION } from "../version.js";

export const spec: CommandSpec = { usage: "lmd version", summary: "Show the version of lmd (server and client)", maxArgs: 0 };

export async function run(argv: string[]): Promise<void> {
  await runCommand(spec, argv, async () => {
    // One quick try: `version` must answer at once even when no daemon runs.
    const client = makeClient({ retries: 0, connectTimeoutMs: 2000, headersTimeoutMs: 5000 });
    let server: string | undefined;
    try {
      server = (await client.json<VersionResponse>("GET", "/api/version")).version;
    } catch {
      server = undefined;
    }
    await client.close();
    if (server === undefined) {
      await out(`Warning: could not connect to a running lmd instance at ${client.url}\nWarning: client version is ${VERSION}\n`);
    } else {
      await out(`lmd version is ${server}\n${server === VERSION ? "" : `Warning: client version is ${VERSION}\n`}`);
    }
  });
}
