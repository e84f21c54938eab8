/**
 * packaging/lmd.env (installed as /etc/lmd/lmd.env) lists every configuration variable (src/config.ts),
 * commented out, with its default under systemd; the unit sets the defaults it claims.
 * Regenerate it with: npm run build && node packaging/gen-env.mjs > packaging/lmd.env
 */
import { readFileSync } from "node:fs";
import t from "tap";
import { VARIABLES } from "../../src/config.js";
import { parseDuration } from "../../src/units.js";

const repo = new URL("../../", import.meta.url);
const envFile = readFileSync(new URL("packaging/lmd.env", repo), "utf8");
const unit = readFileSync(new URL("systemd/lmd.service", repo), "utf8");

/** Defaults the unit sets with Environment= (the daemon's own defaults are for a user's shell). */
const UNIT_DEFAULTS: Record<string, string> = {
  SERVICE_MODELS: "/var/lib/lmd/models",
  SERVICE_LOG_DIR: "/var/log/lmd",
  SERVICE_REGISTRY_AUTH: "/etc/lmd/registry-auth.json",
};

t.test("every variable is there once, commented out, with its default and meaning", async (t) => {
  const lines = envFile.split("\n");
  for (const [name, v] of Object.entries(VARIABLES)) {
    const expected = UNIT_DEFAULTS[name] ?? v.default;
    const at = lines.flatMap((l, i) => (l.startsWith(`#${name}=`) ? [i] : []));
    t.equal(at.length, 1, `#${name}= appears once`);
    const i = at[0] ?? -1;
    t.equal(lines[i], `#${name}=${expected}`, `${name} defaults to '${expected}'`);
    t.ok(lines.slice(Math.max(0, i - 3), i).includes(`# ${v.meaning}`), `${name} is explained above its line`);
  }
});

t.test("nothing is set, and no unknown variable is listed", async (t) => {
  const assignments = envFile.split("\n").filter((l) => /^\s*[A-Z_]+=/.test(l));
  t.same(assignments, [], "no uncommented assignment");
  const listed = envFile.split("\n").flatMap((l) => /^#([A-Z_]+)=/.exec(l)?.[1] ?? []);
  t.same(listed.sort(), Object.keys(VARIABLES).sort(), "exactly the variables of src/config.ts");
});

t.test("the unit sets the defaults the file shows, and reads the file", async (t) => {
  for (const [name, value] of Object.entries(UNIT_DEFAULTS)) t.match(unit, new RegExp(`^Environment=${name}=${value}$`, "m"), `unit sets ${name}`);
  t.match(unit, /^EnvironmentFile=-\/etc\/lmd\/lmd\.env$/m);
});

t.test("TimeoutStopSec leaves time for the drain and the unload after it", async (t) => {
  const stop = parseDuration(/^TimeoutStopSec=(\S+)$/m.exec(unit)?.[1] ?? "");
  const drain = parseDuration(VARIABLES.SERVICE_SHUTDOWN_TIMEOUT.default);
  t.ok(stop !== undefined && drain !== undefined, "both are durations");
  // main.ts gives close-with-grace SERVICE_SHUTDOWN_TIMEOUT + 20s before it gives up.
  t.ok((stop ?? 0) > (drain ?? 0) + 20_000, `TimeoutStopSec (${stop} ms) > SERVICE_SHUTDOWN_TIMEOUT (${drain} ms) + 20s`);
});
