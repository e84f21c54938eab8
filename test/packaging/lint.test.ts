/**
 * Static checks of the packages and units: lintian, rpmlint with its filter file, and
 * systemd-analyze security with a threshold. (systemd-analyze verify runs in install-test.sh,
 * against the installed units, where the paths they name exist.)
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import t from "tap";
import { DEB, ensurePackages, GPU_DEBS, GPU_RPMS, packagingAvailable, REPO, RPM } from "./packages.js";

t.setTimeout(10 * 60_000);

/**
 * Highest acceptable `systemd-analyze security` exposure. lmd.service measures 1.6: what remains
 * exposed is needed (see docs/packaging.md): W+X memory for V8's JIT, devices for GPUs, the
 * network for pulls and clients, AF_UNIX for the runner IPC, full /proc for CPU detection.
 * 2.0 leaves room for nothing more than one small relaxation; dropping any of ProtectSystem=,
 * ProtectHome=, NoNewPrivileges= or the system call filter goes past it.
 */
const SECURITY_THRESHOLD = 2.0;

function run(cmd: string, args: string[]): { status: number | null; out: string } {
  const r = spawnSync(cmd, args, { cwd: REPO, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 5 * 60_000 });
  return { status: r.status, out: `${r.stdout ?? ""}${r.stderr ?? ""}` };
}

if (packagingAvailable(t, ["lintian", "rpmlint", "systemd-analyze", "dpkg-deb", "rpmbuild", "npm"]) && ensurePackages(t)) {
  t.test("lintian: no errors or warnings (overrides each give a reason)", async (t) => {
    const r = run("lintian", ["--fail-on", "error,warning", "--no-tag-display-limit", DEB]);
    const findings = r.out.split("\n").filter((l) => /^[EWX]: /.test(l));
    t.same(findings, [], "no E:/W: lines");
    t.equal(r.status, 0, "lintian exits 0", { output: r.out.slice(-3000) });
  });

  for (const [backend, deb] of Object.entries(GPU_DEBS)) {
    t.test(`lintian lmd-${backend}: no errors or warnings (overrides each give a reason)`, async (t) => {
      const r = run("lintian", ["--fail-on", "error,warning", "--no-tag-display-limit", deb]);
      t.same(r.out.split("\n").filter((l) => /^[EWX]: /.test(l)), [], "no E:/W: lines");
      t.equal(r.status, 0, "lintian exits 0", { output: r.out.slice(-3000) });
    });
  }

  t.test("rpmlint lmd-cuda and lmd-vulkan: nothing left after packaging/rpm/lmd-gpu.rpmlintrc", async (t) => {
    const r = run("rpmlint", ["-r", "packaging/rpm/lmd-gpu.rpmlintrc", ...Object.values(GPU_RPMS)]);
    t.match(r.out, / 0 errors, 0 warnings/, "0 errors, 0 warnings", { output: r.out.slice(-3000) });
    t.notMatch(r.out, /unused-rpmlintrc-filter/, "every filter still matches something");
    t.equal(r.status, 0, "rpmlint exits 0");
  });

  t.test("rpmlint: nothing left after packaging/rpm/lmd.rpmlintrc", async (t) => {
    const r = run("rpmlint", ["-r", "packaging/rpm/lmd.rpmlintrc", RPM]);
    t.match(r.out, / 0 errors, 0 warnings/, "0 errors, 0 warnings", { output: r.out.slice(-3000) });
    t.notMatch(r.out, /unused-rpmlintrc-filter/, "every filter still matches something");
    t.equal(r.status, 0, "rpmlint exits 0");
  });

  const units = ["systemd/lmd.service", "systemd/lmd-gateway.service"].filter((u) => existsSync(`${REPO}${u}`));
  for (const unit of units) {
    t.test(`systemd-analyze security --offline=true ${unit}: exposure at most ${SECURITY_THRESHOLD}`, async (t) => {
      const r = run("systemd-analyze", ["security", "--offline=true", "--no-pager", unit]);
      const m = /Overall exposure level for [^:]+: ([0-9.]+)/.exec(r.out);
      t.ok(m, "systemd-analyze reports an exposure level", { output: r.out.slice(-2000) });
      const exposure = Number(m?.[1]);
      t.ok(exposure <= SECURITY_THRESHOLD, `exposure ${exposure} <= ${SECURITY_THRESHOLD}`, {
        output: r.out
          .split("\n")
          .filter((l) => l.startsWith("✗"))
          .join("\n"),
      });
      // systemd 252 takes --threshold= in tenths of the printed level.
      const gate = run("systemd-analyze", ["security", "--offline=true", "--no-pager", `--threshold=${Math.round(SECURITY_THRESHOLD * 10)}`, unit]);
      t.equal(gate.status, 0, "systemd-analyze security --threshold agrees");
    });
  }
}
