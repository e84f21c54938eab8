/**
 * `lmd reload`: the unit's ExecReload=. Asks the running daemon, through its control socket
 * (src/control.ts), to re-read the policy file and SERVICE_LOG_LEVEL, and exits 0 once the new
 * configuration is in force, or 1 with the reason, so that `systemctl reload lmd` fails when the
 * file is invalid (the daemon keeps the configuration it had).
 */
import { controlSocketPath, requestReload } from "../control.js";
import { runCommand, type CommandSpec } from "./common.js";

export const spec: CommandSpec = {
  usage: "lmd reload",
  summary: "Make the running daemon (under systemd) re-read its policy file and log level",
  maxArgs: 0,
  examples: ["systemctl reload lmd    # runs lmd reload"],
};

export async function run(argv: string[]): Promise<void> {
  await runCommand(spec, argv, async () => {
    const request = { command: "reload" as const, ...(process.env.SERVICE_LOG_LEVEL ? { logLevel: process.env.SERVICE_LOG_LEVEL } : {}) };
    const answer = await requestReload(controlSocketPath(process.env), request, 60_000);
    // The daemon logged the reason at error priority; this line is systemctl's (and the journal's) answer.
    if (!answer.ok) throw new Error(`reload failed: ${answer.error}`);
  });
}
