import t from "tap";
import { AuthFailureLimiter, clientErrorAnswer, originForm } from "../../src/gateway/limits.js";

t.test("clientError codes map to 400, 408, 431", async (t) => {
  t.equal(clientErrorAnswer("HPE_HEADER_OVERFLOW")[0], 431);
  t.equal(clientErrorAnswer("ERR_HTTP_REQUEST_TIMEOUT")[0], 408);
  t.equal(clientErrorAnswer("ERR_HTTP_HEADERS_TIMEOUT")[0], 408);
  t.equal(clientErrorAnswer("HPE_INVALID_METHOD")[0], 400);
});

t.test("auth failures block an address for the rest of its window, then forget it", async (t) => {
  let now = 0;
  const l = new AuthFailureLimiter(3, () => now);
  t.equal(l.fail("a"), false);
  t.equal(l.fail("a"), false);
  t.equal(l.blockedFor("a"), 0);
  t.equal(l.fail("a"), true, "the third reaches the limit");
  now = 10_000;
  t.equal(l.blockedFor("a"), 50);
  t.equal(l.blockedFor("b"), 0, "other addresses are not affected");
  now = 60_000;
  t.equal(l.blockedFor("a"), 0, "the window has passed");
  t.equal(new AuthFailureLimiter(0).fail("a"), false, "0 disables");
});

t.test("origin-form targets", async (t) => {
  t.equal(originForm("/api/tags?x=1"), "/api/tags?x=1");
  t.equal(originForm("http://h:1/a/b?c"), "/a/b?c");
  t.equal(originForm("https://h"), "/");
  t.equal(originForm("ftp://h/x"), undefined);
  t.equal(originForm("*"), undefined);
});

t.test("addressKey: a client's network, /32 and /64 by default", async (t) => {
  const { addressKey } = await import("../../src/http/connections.js");
  const d = { v4: 32, v6: 64 };
  t.equal(addressKey("203.0.113.7", d), "203.0.113.7/32");
  t.equal(addressKey("::ffff:203.0.113.7", d), "203.0.113.7/32", "IPv4 mapped into IPv6 counts as IPv4");
  t.equal(addressKey("2001:db8:1:2:aaaa:bbbb:cccc:dddd", d), "2001:db8:1:2:0:0:0:0/64");
  t.equal(addressKey("2001:db8:1:2::1", d), addressKey("2001:db8:1:2:ffff::9", d), "one /64 is one client");
  t.not(addressKey("2001:db8:1:2::1", d), addressKey("2001:db8:1:3::1", d), "the next /64 is another");
  t.equal(addressKey("fe80::1%eth0", d), "fe80:0:0:0:0:0:0:0/64", "a zone is dropped");
  t.equal(addressKey("::1", d), "0:0:0:0:0:0:0:0/64");
  t.equal(addressKey("::ffff:1.2.3.4", { v4: 24, v6: 64 }), "1.2.3.0/24");
  t.equal(addressKey("10.1.255.200", { v4: 20, v6: 64 }), "10.1.240.0/20");
  t.equal(addressKey("10.1.2.3", { v4: 0, v6: 0 }), "0.0.0.0/0");
  t.equal(addressKey("2001:db8:abcd:1234::5", { v4: 32, v6: 36 }), "2001:db8:a000:0:0:0:0:0/36");
  t.equal(addressKey("::ffff:0:1.2.3.4", { v4: 32, v6: 128 }), "0:0:0:0:ffff:0:102:304/128", "a dotted quad inside IPv6 read as two groups");
  t.equal(addressKey("-", d), "-", "no address: as is");
});
