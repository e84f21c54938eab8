/**
 * The packages under a real systemd: test/packaging/install-test.sh boots a Debian 12
 * container per scenario and prints TAP, one assertion per step. Needs root and the tools that
 * .ci/run installs; see packages.ts for what happens without them.
 */
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import t from "tap";
import { DEB, ensurePackages, GPU_DEBS, GPU_RPMS, INSTALL_TEST, packagingAvailable, RPM, runInstallTest, WORK } from "./packages.js";

// mmdebstrap (about a minute, once) + building the packages when absent + five containers.
t.setTimeout(30 * 60_000);

const TOOLS = ["mmdebstrap", "systemd-nspawn", "nsenter", "mountpoint", "dpkg-deb", "rpm", "rpmbuild", "npm"];

if (packagingAvailable(t, TOOLS) && ensurePackages(t)) {
  // Whatever happens (even a killed script), leave no container, mount or cgroup behind.
  t.teardown(() => {
    runInstallTest(["cleanup"], 120_000);
  });

  t.test("the .deb: install, start, generate, stop, logs, upgrade, purge", (t) =>
    t.spawn("bash", [INSTALL_TEST, "deb", DEB], { timeout: 8 * 60_000 }, "install-test.sh deb"),
  );

  t.test("the .rpm: contents, scriptlets, rpm --root install, start, stop", (t) =>
    t.spawn("bash", [INSTALL_TEST, "rpm", RPM], { timeout: 5 * 60_000 }, "install-test.sh rpm"),
  );

  t.test("lmd-cuda and lmd-vulkan beside lmd, on a host without a GPU: CPU, the fallback logged, kept by an upgrade", (t) =>
    t.spawn("bash", [INSTALL_TEST, "gpu", DEB, GPU_DEBS.cuda, GPU_DEBS.vulkan], { timeout: 8 * 60_000 }, "install-test.sh gpu"),
  );

  t.test("lmd-cuda and lmd-vulkan as rpms: rpm --root beside lmd, kept by a reinstall of lmd, erase order", (t) =>
    t.spawn("bash", [INSTALL_TEST, "gpu-rpm", RPM, GPU_RPMS.cuda, GPU_RPMS.vulkan], { timeout: 5 * 60_000 }, "install-test.sh gpu-rpm"),
  );

  t.test("the install test fails on a package whose unit is broken, and cleans up", async (t) => {
    const broken = `${WORK}/lmd-broken.deb`;
    t.teardown(() => rmSync(broken, { force: true }));
    const repack = runInstallTest(["repack", DEB, broken, "0.0.1", "broken"], 120_000);
    t.equal(repack.status, 0, "repacked the .deb with RestrictAddressFamilies=AF_UNIX", { output: repack.output });
    const mountsBefore = overlayMounts();
    const run = runInstallTest(["deb", broken], 5 * 60_000);
    t.equal(run.status, 1, "install-test.sh exits 1");
    t.match(run.output, /^ok 3 - dpkg -i installs the package/m, "the package installs");
    t.match(run.output, /^not ok 5 - lmd\.service is enabled and active; the API answers/m, "the start check fails");
    t.notMatch(run.output, /^ok 5 /m);
    t.match(run.output, /EAFNOSUPPORT|Address family not supported/, "the diagnostics show why");
    t.notMatch(run.output, /^ok 6 /m, "and the scenario stops there");
    t.same(overlayMounts(), mountsBefore, "its overlay is unmounted");
    t.same(containerDirs(), [], "its container directory is removed");
    t.notOk(nspawnCgroups(), "no payload/supervisor cgroups are left");
  });
}

function overlayMounts(): string[] {
  return readFileSync("/proc/mounts", "utf8").split("\n").filter((l) => l.includes(WORK));
}

function containerDirs(): string[] {
  if (!existsSync(WORK)) return [];
  return readdirSync(WORK, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
}

/** True when a payload/ or supervisor/ cgroup that systemd-nspawn --keep-unit makes is still there. */
function nspawnCgroups(): boolean {
  const own = readFileSync("/proc/self/cgroup", "utf8").split("\n");
  return own.some((line) => {
    const m = /^[0-9]+:(name=systemd|):(.*)$/.exec(line);
    if (!m) return false;
    const mount = m[1] === "name=systemd" ? "/sys/fs/cgroup/systemd" : existsSync("/sys/fs/cgroup/unified") ? "/sys/fs/cgroup/unified" : "/sys/fs/cgroup";
    const base = `${mount}${m[2] === "/" ? "" : m[2]}`;
    return existsSync(`${base}/payload`) || existsSync(`${base}/supervisor`);
  });
}
