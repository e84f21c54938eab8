/** The address classes of the blind-SSRF policy (src/registry/address.ts) and what may reach what. */
import t from "tap";
import { allowed, classify } from "../../src/registry/address.js";

t.test("addresses are classified as loopback, link-local, private or public", async (t) => {
  const cases: Array<[string, string]> = [
    ["127.0.0.1", "loopback"],
    ["127.255.0.9", "loopback"],
    ["0.0.0.0", "loopback"],
    ["::1", "loopback"],
    ["::", "loopback"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:a9fe:a9fe", "linklocal"], // IPv4-mapped, both spellings
    ["169.254.169.254", "linklocal"],
    ["fe80::1", "linklocal"],
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "private"],
    ["fd00::2", "private"],
    ["172.32.0.1", "public"],
    ["8.8.8.8", "public"],
    ["2001:4860:4860::8888", "public"],
  ];
  for (const [address, kind] of cases) t.equal(classify(address), kind, address);
});

t.test("a registry leads only outwards", async (t) => {
  t.ok(allowed("loopback", "loopback"));
  t.ok(allowed("loopback", "linklocal"));
  t.ok(allowed("private", "private"));
  t.ok(allowed("private", "public"));
  t.notOk(allowed("private", "loopback"));
  t.notOk(allowed("private", "linklocal"));
  t.ok(allowed("public", "public"));
  t.notOk(allowed("public", "private"));
  t.notOk(allowed("public", "loopback"));
  t.notOk(allowed("public", "linklocal"));
});
