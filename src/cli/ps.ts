/** `lmd ps`: the models loaded now, as an aligned table (GET /api/ps). */
import { makeClient, out, runCommand, humanSize, humanTime, shortId, table, type CommandSpec } from "./common.js";
import type { PsResponse } from "./wire.js";

export const spec: CommandSpec = {
  usage: "lmd ps",
  summary: "List running models",
  maxArgs: 0,
};

/** "100% CPU", "100% GPU" or "48%/52% CPU/GPU", from the bytes in VRAM. */
export function processor(size = 0, vram = 0): string {
  if (size <= 0 || vram <= 0) return "100% CPU";
  if (vram >= size) return "100% GPU";
  const gpu = Math.round((vram / size) * 100);
  return `${100 - gpu}%/${gpu}% CPU/GPU`;
}

/** "4 minutes from now", "Forever" (never expires), "Stopping..." (past its time). */
export function until(expiresAt: string | undefined, now = Date.now()): string {
  if (!expiresAt) return "";
  const t = Date.parse(expiresAt);
  if (Number.isNaN(t)) return "";
  if (t - now > 100 * 365 * 86_400_000) return "Forever";
  if (t <= now) return "Stopping...";
  return humanTime(expiresAt, now);
}

export async function run(argv: string[]): Promise<void> {
  await runCommand(spec, argv, async () => {
    const client = makeClient();
    const ps = await client.json<PsResponse>("GET", "/api/ps");
    const rows = (ps.models ?? []).map((m) => [
      m.name,
      shortId(m.digest),
      humanSize(m.size),
      processor(m.size, m.size_vram),
      m.context_length === undefined ? "" : String(m.context_length),
      until(m.expires_at),
    ]);
    await out(table(["NAME", "ID", "SIZE", "PROCESSOR", "CONTEXT", "UNTIL"], rows));
    await client.close();
  });
}
