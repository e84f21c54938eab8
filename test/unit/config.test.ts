import t from "tap";
import { clientUrl, ConfigError, isLoopbackHost, loadConfig, parseListenAddress, VARIABLES } from "../../src/config.js";
import { parseDuration, parseSize } from "../../src/units.js";

t.test("SERVICE_HOST accepts every form of CONTRACT §2", async (t) => {
  const cases: [string, string, number][] = [
    ["127.0.0.1:11434", "127.0.0.1", 11434],
    ["127.0.0.1", "127.0.0.1", 11434],
    ["0.0.0.0:8080", "0.0.0.0", 8080],
    [":8080", "", 8080],
    ["localhost:9000", "localhost", 9000],
    ["[::1]:11500", "::1", 11500],
    ["[::]:11500", "::", 11500],
    ["::1", "::1", 11434],
    ["::", "::", 11434],
    ["http://127.0.0.1:8000", "127.0.0.1", 8000],
    ["https://example.internal:443", "example.internal", 443],
    ["http://[::1]:7000/", "::1", 7000],
    ["HTTP://LocalHost:1234", "localhost", 1234],
    ["10.1.2.3:0", "10.1.2.3", 0],
    ["  127.0.0.1:11434  ", "127.0.0.1", 11434],
  ];
  for (const [input, host, port] of cases) t.same(parseListenAddress(input), { host, port }, input);
});

t.test("invalid SERVICE_HOST values are refused, naming the variable", async (t) => {
  for (const bad of ["127.0.0.1:99999", "127.0.0.1:abc", "127.0.0.1:", "ftp://host:1", "[::1", "[zz]:1", "host/path", "bad host:1", "-x:1", "1:2:3:4:5:6:7:8:9:g"]) {
    t.throws(() => loadConfig({ SERVICE_HOST: bad }), { name: "ConfigError", variable: "SERVICE_HOST" }, bad);
  }
});

t.test("every variable has its documented default", async (t) => {
  const c = loadConfig({ HOME: "/home/u" });
  t.same(c.listen, { host: "127.0.0.1", port: 11434 });
  t.equal(c.models, "/home/u/.lmd/models");
  t.equal(c.keepAliveMs, 5 * 60_000);
  t.equal(c.numParallel, 1);
  t.equal(c.maxLoadedModels, 0);
  t.equal(c.maxQueue, 512);
  t.equal(c.contextLength, 4096);
  t.same(c.origins, []);
  t.same(c.allowedHosts, []);
  t.equal(c.maxBodyBytes, 8 * 1024 * 1024);
  t.equal(c.logLevel, "info");
  t.equal(c.logDir, undefined);
  t.equal(c.shutdownTimeoutMs, 30_000);
  t.equal(c.loadTimeoutMs, 5 * 60_000);
  t.ok(Number.isInteger(c.threads) && c.threads >= 1, "threads default to the physical cores");
  t.equal(c.gpu, "auto");
  t.ok(Object.isFrozen(c), "config is frozen");
  t.same(Object.keys(VARIABLES).sort(), [
    "SERVICE_ALLOWED_HOSTS", "SERVICE_CONTEXT_LENGTH", "SERVICE_GPU", "SERVICE_HOST", "SERVICE_KEEP_ALIVE", "SERVICE_LOAD_TIMEOUT",
    "SERVICE_LOG_DIR", "SERVICE_LOG_LEVEL", "SERVICE_MAX_BODY", "SERVICE_MAX_LOADED_MODELS", "SERVICE_MAX_QUEUE", "SERVICE_MODELS",
    "SERVICE_NUM_PARALLEL", "SERVICE_ORIGINS", "SERVICE_SHUTDOWN_TIMEOUT", "SERVICE_THREADS",
  ]);
});

t.test("values are parsed", async (t) => {
  const c = loadConfig({
    SERVICE_MODELS: "/srv/models",
    SERVICE_KEEP_ALIVE: "-1",
    SERVICE_NUM_PARALLEL: "4",
    SERVICE_ORIGINS: "https://a.example, https://*.b.example",
    SERVICE_ALLOWED_HOSTS: "My.Host",
    SERVICE_MAX_BODY: "1MiB",
    SERVICE_SHUTDOWN_TIMEOUT: "1m30s",
    SERVICE_THREADS: "3",
    SERVICE_GPU: "false",
    SERVICE_LOG_DIR: "/var/log/lmd",
  });
  t.equal(c.models, "/srv/models");
  t.equal(c.keepAliveMs, -1000);
  t.equal(c.numParallel, 4);
  t.same(c.origins, ["https://a.example", "https://*.b.example"]);
  t.same(c.allowedHosts, ["my.host"]);
  t.equal(c.maxBodyBytes, 1024 * 1024);
  t.equal(c.shutdownTimeoutMs, 90_000);
  t.equal(c.threads, 3);
  t.equal(c.gpu, false);
  t.equal(c.logDir, "/var/log/lmd");
  t.equal(loadConfig({ STATE_DIRECTORY: "/var/lib/lmd" }).models, "/var/lib/lmd/models", "systemd's StateDirectory");
  t.equal(loadConfig({ SERVICE_THREADS: "" }).threads, loadConfig({}).threads, "an empty value means unset");
});

t.test("invalid values stop with a message naming the variable and the problem", async (t) => {
  const cases: [string, string, RegExp][] = [
    ["SERVICE_NUM_PARALLEL", "zero", /SERVICE_NUM_PARALLEL: must be integer/],
    ["SERVICE_NUM_PARALLEL", "0", /SERVICE_NUM_PARALLEL: must be >= 1/],
    ["SERVICE_KEEP_ALIVE", "forever", /SERVICE_KEEP_ALIVE/],
    ["SERVICE_MAX_BODY", "lots", /SERVICE_MAX_BODY: 'lots' is not a size/],
    ["SERVICE_LOG_LEVEL", "loud", /SERVICE_LOG_LEVEL: must be equal to one of the allowed values/],
    ["SERVICE_GPU", "metal", /SERVICE_GPU/],
    ["SERVICE_SHUTDOWN_TIMEOUT", "-5s", /SERVICE_SHUTDOWN_TIMEOUT: must not be negative/],
    ["SERVICE_LOAD_TIMEOUT", "0", /SERVICE_LOAD_TIMEOUT: must be positive/],
    ["SERVICE_THREADS", "2.5", /SERVICE_THREADS: must be integer/],
  ];
  for (const [name, value, message] of cases) {
    const err = t.throws(() => loadConfig({ [name]: value })) as unknown;
    t.ok(err instanceof ConfigError, `${name}=${value} is a ConfigError`);
    t.match((err as Error).message, message, `${name}=${value}`);
  }
});

t.test("loopback detection and client addresses", async (t) => {
  for (const h of ["127.0.0.1", "127.1.2.3", "localhost", "LOCALHOST", "::1", "[::1]", "app.localhost"]) t.ok(isLoopbackHost(h), h);
  for (const h of ["0.0.0.0", "::", "10.0.0.1", "example.com", "localhost.example.com", ""]) t.notOk(isLoopbackHost(h), h);
  t.equal(clientUrl({ host: "0.0.0.0", port: 1 }), "http://127.0.0.1:1");
  t.equal(clientUrl({ host: "", port: 2 }), "http://127.0.0.1:2");
  t.equal(clientUrl({ host: "::", port: 3 }), "http://[::1]:3");
  t.equal(clientUrl({ host: "10.0.0.5", port: 4 }), "http://10.0.0.5:4");
});

t.test("durations and sizes", async (t) => {
  t.equal(parseDuration("5m"), 300_000);
  t.equal(parseDuration("1h30m"), 5_400_000);
  t.equal(parseDuration("250ms"), 250);
  t.equal(parseDuration("-1"), -1000);
  t.equal(parseDuration(30), 30_000);
  t.equal(parseDuration("soon"), undefined);
  t.equal(parseSize("8MiB"), 8 * 1024 * 1024);
  t.equal(parseSize("2kb"), 2000);
  t.equal(parseSize("100"), 100);
  t.equal(parseSize("1 furlong"), undefined);
});
