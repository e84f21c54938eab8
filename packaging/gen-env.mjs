#!/usr/bin/env node
// Writes packaging/lmd.env (the /etc/lmd/lmd.env conffile) from VARIABLES in src/config.ts.
// Usage, after `npm run build`: node packaging/gen-env.mjs > packaging/lmd.env
// test/packaging/env-file.test.ts checks the committed file against VARIABLES.
import { VARIABLES } from "../dist/src/config.js";

/** Values the unit sets with Environment=, which differ from the daemon's own defaults. */
const UNIT_DEFAULTS = { SERVICE_MODELS: "/var/lib/lmd/models", SERVICE_LOG_DIR: "/var/log/lmd", SERVICE_REGISTRY_AUTH: "/etc/lmd/registry-auth.json" };
const NOTES = {
  SERVICE_MODELS: "set by the unit (StateDirectory=lmd)",
  SERVICE_LOG_DIR: "set by the unit (LogsDirectory=lmd); set it empty to log to the journal only",
  SERVICE_SHUTDOWN_TIMEOUT: "above 60s, raise TimeoutStopSec= too (systemctl edit lmd)",
  SERVICE_CACHE_DIR: "default /var/lib/lmd/cache, beside the model store; removed with the package on purge",
  SERVICE_REGISTRY_AUTH: "set by the unit; create it mode 0600, owner lmd: install -m 600 -o lmd -g lmd /dev/null /etc/lmd/registry-auth.json",
  SERVICE_HOST: "binding beyond loopback exposes an API without authentication: see lmd-gateway.service",
};

let out = `# /etc/lmd/lmd.env: configuration of lmd.service (read by its EnvironmentFile=).
#
# Every variable lmd reads is listed below, commented out, with its default under systemd.
# Uncomment a line and change it, then: systemctl restart lmd
# Values are taken literally (no shell quoting or expansion); an empty value means the default.
# An invalid value stops the daemon with a message in "journalctl -u lmd" and exit status 78.
# Reference: /usr/share/doc/lmd/configuration.md
`;
for (const [name, v] of Object.entries(VARIABLES)) {
  out += `\n# ${v.meaning}\n`;
  if (NOTES[name]) out += `# (${NOTES[name]})\n`;
  out += `#${name}=${UNIT_DEFAULTS[name] ?? v.default}\n`;
}
process.stdout.write(out);
