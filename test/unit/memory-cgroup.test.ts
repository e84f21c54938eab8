/**
 * The memory check's reading of cgroupfs, on fixture trees (the machine running the tests has one
 * cgroup version, or none): cgroup v1's `memory` controller, v2's unified hierarchy, limits set on an
 * ancestor, a container's view where the listed path is absent, and the host's MemAvailable when no
 * level limits memory.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { availableRam, cgroupHeadroom, type MemoryFiles } from "../../src/scheduler/memory.js";

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;
/** What a v1 `memory.limit_in_bytes` says when nothing is set. */
const V1_UNLIMITED = "9223372036854771712";

/** A fixture: /proc/meminfo with 8 GiB available, /proc/self/cgroup, and files under a cgroupfs root. */
function fixture(t: Test, selfCgroup: string, files: Record<string, string>): MemoryFiles {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lmd-cgroup-"));
  t.teardown(() => import("node:fs/promises").then((fs) => fs.rm(dir, { recursive: true, force: true })));
  const root = path.join(dir, "sys/fs/cgroup");
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    writeFileSync(path.join(root, name), `${text}\n`);
  }
  mkdirSync(root, { recursive: true });
  writeFileSync(path.join(dir, "meminfo"), `MemTotal:       16777216 kB\nMemFree:         1048576 kB\nMemAvailable:    ${(8 * GiB) / 1024} kB\n`);
  writeFileSync(path.join(dir, "self-cgroup"), selfCgroup);
  return { meminfo: path.join(dir, "meminfo"), selfCgroup: path.join(dir, "self-cgroup"), cgroupRoot: root };
}

const V1_SELF =
  "12:pids:/system.slice/lmd.service\n5:cpu,cpuacct:/system.slice/lmd.service\n4:memory:/system.slice/lmd.service\n1:name=systemd:/system.slice/lmd.service\n0::/system.slice/lmd.service\n";

t.test("cgroup v1: memory.limit_in_bytes − memory.usage_in_bytes", async (t) => {
  const files = fixture(t, V1_SELF, {
    "memory/memory.limit_in_bytes": V1_UNLIMITED,
    "memory/memory.usage_in_bytes": String(10 * GiB),
    "memory/system.slice/memory.limit_in_bytes": V1_UNLIMITED,
    "memory/system.slice/memory.usage_in_bytes": String(3 * GiB),
    "memory/system.slice/lmd.service/memory.limit_in_bytes": String(2 * GiB),
    "memory/system.slice/lmd.service/memory.usage_in_bytes": String(512 * MiB),
  });
  t.equal(await cgroupHeadroom(files), 1.5 * GiB, "the service's limit less its usage");
  t.equal(await availableRam(files), 1.5 * GiB, "the cgroup, not the machine's 8 GiB, bounds a load");
});

t.test("cgroup v1: a limit on an ancestor binds the service", async (t) => {
  const files = fixture(t, V1_SELF, {
    "memory/system.slice/memory.limit_in_bytes": String(GiB),
    "memory/system.slice/memory.usage_in_bytes": String(768 * MiB),
    "memory/system.slice/lmd.service/memory.limit_in_bytes": V1_UNLIMITED,
    "memory/system.slice/lmd.service/memory.usage_in_bytes": String(512 * MiB),
  });
  t.equal(await availableRam(files), 256 * MiB);
});

t.test("cgroup v1 with the memory controller shared with others on one line", async (t) => {
  const files = fixture(t, "3:cpuset,memory:/lmd\n", {
    "memory/lmd/memory.limit_in_bytes": String(4 * GiB),
    "memory/lmd/memory.usage_in_bytes": String(GiB),
  });
  t.equal(await availableRam(files), 3 * GiB);
});

t.test("cgroup v1 without any limit: the host's MemAvailable", async (t) => {
  const files = fixture(t, V1_SELF, {
    "memory/system.slice/lmd.service/memory.limit_in_bytes": V1_UNLIMITED,
    "memory/system.slice/lmd.service/memory.usage_in_bytes": String(512 * MiB),
  });
  t.equal(await cgroupHeadroom(files), undefined, "no limit");
  t.equal(await availableRam(files), 8 * GiB, "the host's MemAvailable");
});

t.test("cgroup v2: memory.max − memory.current, the smallest over the ancestors", async (t) => {
  const self = "0::/system.slice/lmd.service\n";
  const own = fixture(t, self, {
    "system.slice/memory.max": "max",
    "system.slice/memory.current": String(5 * GiB),
    "system.slice/lmd.service/memory.max": String(6 * GiB),
    "system.slice/lmd.service/memory.current": String(GiB),
  });
  t.equal(await availableRam(own), 5 * GiB, "the service's limit");
  const parent = fixture(t, self, {
    "system.slice/memory.max": String(3 * GiB),
    "system.slice/memory.current": String(2 * GiB),
    "system.slice/lmd.service/memory.max": "max",
    "system.slice/lmd.service/memory.current": String(GiB),
  });
  t.equal(await availableRam(parent), GiB, "the slice's limit");
});

t.test("cgroup v2 in a container: the listed path is not in its view, the mount's root is its group", async (t) => {
  const files = fixture(t, "0::/../../machine.slice/box.scope\n", { "memory.max": String(2 * GiB), "memory.current": String(1.75 * GiB) });
  t.equal(await availableRam(files), 0.25 * GiB);
});

t.test("no cgroup limits memory: the host's MemAvailable", async (t) => {
  t.equal(
    await availableRam(fixture(t, "0::/user.slice\n", { "user.slice/memory.max": "max", "user.slice/memory.current": String(GiB) })),
    8 * GiB,
    "v2, memory.max is max",
  );
  t.equal(await availableRam(fixture(t, "", {})), 8 * GiB, "no cgroup at all");
  t.equal(await availableRam(fixture(t, V1_SELF, {})), 8 * GiB, "v1 listed but its controller not mounted");
});
