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
