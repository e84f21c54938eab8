import t from "tap";
import { clientUrl, ConfigError, isLoopbackHost, loadConfig, parseListenAddress, unknownVariables, VARIABLES } from "../../src/config.js";
import { parseDuration, parseSize } from "../../src/units.js";

t.test("SERVICE_HOST accepts every documented form", async (t) => {
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
  for (const bad of [
    "127.0.0.1:99999",
    "127.0.0.1:abc",
    "127.0.0.1:",
    "ftp://host:1",
    "[::1",
    "[zz]:1",
    "host/path",
    "bad host:1",
    "-x:1",
    "1:2:3:4:5:6:7:8:9:g",
  ]) {
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
  t.equal(c.maxPredict, 0, "SERVICE_MAX_PREDICT: 0 = auto (4 x num_ctx)");
  t.equal(c.contextLength, 4096);
  t.same(c.origins, []);
  t.same(c.allowedHosts, []);
  t.equal(c.maxBodyBytes, 8 * 1024 * 1024);
  t.equal(c.logLevel, "info");
  t.equal(c.logDir, undefined);
  t.equal(c.shutdownTimeoutMs, 30_000);
  t.equal(c.loadTimeoutMs, 5 * 60_000);
  t.equal(c.writeTimeoutMs, 30_000);
  t.equal(c.renderTimeoutMs, 10_000);
  t.equal(c.threads, undefined, "threads are chosen per load unless set");
  t.equal(c.gpu, "auto");
  t.equal(c.gpuOverheadBytes, 0, "no VRAM reserved");
  t.equal(c.modelsConfig, undefined);
  t.equal(c.truncate, true, "prompts over the context are truncated unless told otherwise");
  t.equal(c.streamIntervalMs, 10, "a stream's tokens are gathered for 10 ms");
  t.equal(c.kvCacheType, "f16");
  t.equal(c.flashAttention, "auto");
  t.equal(c.cacheDir, "/home/u/.lmd/cache", "saved prefixes beside the model store");
  t.equal(c.cacheMaxBytes, 8 * 1024 ** 3);
  t.equal(c.cacheMinTokens, 1024);
  t.same(
    c.registry,
    { authFile: "/home/u/.docker/config.json", caFile: undefined, nodeExtraCaFile: undefined, mirrors: new Map() },
    "registry: docker login's file, no CA, no mirrors",
  );
  t.equal(c.maxUnreferencedBlobBytes, 64 * 1024 ** 3, "SERVICE_MAX_UNREFERENCED_BLOBS: 64 GiB");
  t.ok(Object.isFrozen(c), "config is frozen");
  t.same(Object.keys(VARIABLES).sort(), [
    "SERVICE_ALLOWED_HOSTS",
    "SERVICE_CACHE_DIR",
    "SERVICE_CACHE_MAX",
    "SERVICE_CACHE_MIN_TOKENS",
    "SERVICE_CONTEXT_LENGTH",
    "SERVICE_FLASH_ATTENTION",
    "SERVICE_GPU",
    "SERVICE_GPU_OVERHEAD",
    "SERVICE_HOST",
    "SERVICE_KEEP_ALIVE",
    "SERVICE_KV_CACHE_TYPE",
    "SERVICE_LOAD_TIMEOUT",
    "SERVICE_LOG_DIR",
    "SERVICE_LOG_LEVEL",
    "SERVICE_MAX_BODY",
    "SERVICE_MAX_LOADED_MODELS",
    "SERVICE_MAX_PREDICT",
    "SERVICE_MAX_QUEUE",
    "SERVICE_MAX_UNREFERENCED_BLOBS",
    "SERVICE_MODELS",
    "SERVICE_MODELS_CONFIG",
    "SERVICE_NUM_PARALLEL",
    "SERVICE_ORIGINS",
    "SERVICE_REGISTRY_AUTH",
    "SERVICE_REGISTRY_CA",
    "SERVICE_REGISTRY_MIRRORS",
    "SERVICE_RENDER_TIMEOUT",
    "SERVICE_SHUTDOWN_TIMEOUT",
    "SERVICE_STREAM_INTERVAL",
    "SERVICE_THREADS",
    "SERVICE_TRUNCATE",
    "SERVICE_WRITE_TIMEOUT",
  ]);
});

t.test("SERVICE_MAX_UNREFERENCED_BLOBS is a size", async (t) => {
  t.equal(loadConfig({ SERVICE_MAX_UNREFERENCED_BLOBS: "500MB" }).maxUnreferencedBlobBytes, 500_000_000);
  t.equal(loadConfig({ SERVICE_MAX_UNREFERENCED_BLOBS: "1048576" }).maxUnreferencedBlobBytes, 1_048_576);
  t.throws(() => loadConfig({ SERVICE_MAX_UNREFERENCED_BLOBS: "lots" }), { name: "ConfigError", variable: "SERVICE_MAX_UNREFERENCED_BLOBS" });
});

t.test("SERVICE_STREAM_INTERVAL is a duration from 0 (each token at once) to 1s", async (t) => {
  t.equal(loadConfig({ SERVICE_STREAM_INTERVAL: "0" }).streamIntervalMs, 0);
  t.equal(loadConfig({ SERVICE_STREAM_INTERVAL: "25ms" }).streamIntervalMs, 25);
  t.equal(loadConfig({ SERVICE_STREAM_INTERVAL: "1s" }).streamIntervalMs, 1000);
  t.throws(() => loadConfig({ SERVICE_STREAM_INTERVAL: "2s" }), /SERVICE_STREAM_INTERVAL: must be at most 1s/);
  t.throws(() => loadConfig({ SERVICE_STREAM_INTERVAL: "-5ms" }), /SERVICE_STREAM_INTERVAL: must not be negative/);
  t.throws(() => loadConfig({ SERVICE_STREAM_INTERVAL: "soon" }), { name: "ConfigError", variable: "SERVICE_STREAM_INTERVAL" });
});

t.test("SERVICE_KV_CACHE_TYPE and SERVICE_FLASH_ATTENTION", async (t) => {
  t.same(pick(loadConfig({ SERVICE_KV_CACHE_TYPE: "q8_0" })), { kvCacheType: "q8_0", flashAttention: true }, "a quantized cache turns auto on");
  t.same(pick(loadConfig({ SERVICE_KV_CACHE_TYPE: "Q4_0", SERVICE_FLASH_ATTENTION: "on" })), { kvCacheType: "q4_0", flashAttention: true }, "any case");
  t.same(pick(loadConfig({ SERVICE_FLASH_ATTENTION: "0" })), { kvCacheType: "f16", flashAttention: false });
  t.same(pick(loadConfig({ OLLAMA_KV_CACHE_TYPE: "q8_0", OLLAMA_SCHED_SPREAD: "1" })), { kvCacheType: "q8_0", flashAttention: true }, "Ollama's names");
  t.throws(() => loadConfig({ SERVICE_KV_CACHE_TYPE: "q8_0", SERVICE_FLASH_ATTENTION: "false" }), {
    name: "ConfigError",
    variable: "SERVICE_FLASH_ATTENTION",
    message: /a q8_0 KV cache needs flash attention/,
  });
  t.throws(() => loadConfig({ SERVICE_KV_CACHE_TYPE: "q5_1" }), { name: "ConfigError", variable: "SERVICE_KV_CACHE_TYPE" });
  t.throws(() => loadConfig({ SERVICE_FLASH_ATTENTION: "sometimes" }), { name: "ConfigError", variable: "SERVICE_FLASH_ATTENTION" });
  function pick(c: ReturnType<typeof loadConfig>) {
    return { kvCacheType: c.kvCacheType, flashAttention: c.flashAttention };
  }
});

t.test("saved prompt prefixes: SERVICE_CACHE_DIR, SERVICE_CACHE_MAX, SERVICE_CACHE_MIN_TOKENS", async (t) => {
  t.equal(loadConfig({ STATE_DIRECTORY: "/var/lib/lmd" }).cacheDir, "/var/lib/lmd/cache", "under systemd, in the state directory");
  t.equal(loadConfig({ SERVICE_MODELS: "/srv/m/models" }).cacheDir, "/srv/m/cache", "beside a store given");
  t.equal(loadConfig({ HOME: "/home/u", SERVICE_CACHE_DIR: "~/c" }).cacheDir, "/home/u/c");
  t.equal(loadConfig({ SERVICE_CACHE_MAX: "0" }).cacheMaxBytes, 0, "0 saves nothing");
  t.equal(loadConfig({ SERVICE_CACHE_MAX: "2GiB" }).cacheMaxBytes, 2 * 1024 ** 3);
  t.throws(() => loadConfig({ SERVICE_CACHE_MAX: "lots" }), { name: "ConfigError", variable: "SERVICE_CACHE_MAX" });
  t.throws(() => loadConfig({ SERVICE_CACHE_MIN_TOKENS: "0" }), { name: "ConfigError", variable: "SERVICE_CACHE_MIN_TOKENS" });
});

t.test("SERVICE_TRUNCATE is a boolean in any of the usual spellings", async (t) => {
  for (const v of ["1", "true", "YES", "On"]) t.equal(loadConfig({ SERVICE_TRUNCATE: v }).truncate, true, v);
  for (const v of ["0", "false", "No", "OFF"]) t.equal(loadConfig({ SERVICE_TRUNCATE: v }).truncate, false, v);
  t.throws(() => loadConfig({ SERVICE_TRUNCATE: "maybe" }), /SERVICE_TRUNCATE: 'maybe' is not a boolean/);
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
    ["SERVICE_NUM_PARALLEL", "zero", /SERVICE_NUM_PARALLEL: 'zero' is not an integer$/],
    ["SERVICE_NUM_PARALLEL", "0", /SERVICE_NUM_PARALLEL: '0' is too small: must be at least 1$/],
    ["SERVICE_MAX_QUEUE", "2000000", /SERVICE_MAX_QUEUE: '2000000' is too large: must be at most 1000000$/],
    ["SERVICE_KEEP_ALIVE", "forever", /SERVICE_KEEP_ALIVE: 'forever' is not a duration \(examples: 30s, 5m, 1h, 300\)$/],
    ["SERVICE_MAX_BODY", "lots", /SERVICE_MAX_BODY: 'lots' is not a size/],
    ["SERVICE_LOG_LEVEL", "loud", /SERVICE_LOG_LEVEL: 'loud' is not one of fatal, error, warn, info, debug, trace, silent$/],
    ["SERVICE_GPU", "metal", /SERVICE_GPU: 'metal' is not one of auto, cuda, vulkan, false$/],
    ["SERVICE_SHUTDOWN_TIMEOUT", "-5s", /SERVICE_SHUTDOWN_TIMEOUT: must not be negative/],
    ["SERVICE_LOAD_TIMEOUT", "0", /SERVICE_LOAD_TIMEOUT: must be positive/],
    ["SERVICE_THREADS", "2.5", /SERVICE_THREADS: '2.5' is not an integer$/],
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

// Habits from systemd and Ollama.
t.test("booleans accept 1/0/true/false/yes/no/on/off in any case (daemon and gateway)", async (t) => {
  const { loadGatewayConfig } = await import("../../src/gateway/config.js");
  const base = { GATEWAY_API_KEYS: "k", GATEWAY_HOST: "127.0.0.1:1" };
  for (const v of ["1", "true", "TRUE", "yes", "Yes", "on", "ON"]) {
    t.equal(loadGatewayConfig({ ...base, GATEWAY_ALLOW_PLAINTEXT: v }).tls, undefined, `GATEWAY_ALLOW_PLAINTEXT=${v} allows plaintext`);
  }
  for (const v of ["0", "false", "No", "off", "OFF"]) {
    t.throws(() => loadGatewayConfig({ ...base, GATEWAY_ALLOW_PLAINTEXT: v }), { name: "ConfigError" }, `GATEWAY_ALLOW_PLAINTEXT=${v} is false`);
  }
  t.throws(() => loadGatewayConfig({ ...base, GATEWAY_ALLOW_PLAINTEXT: "maybe" }), { name: "ConfigError", variable: "GATEWAY_ALLOW_PLAINTEXT" });
  for (const v of ["0", "no", "OFF", "False"]) t.equal(loadConfig({ SERVICE_GPU: v }).gpu, false, `SERVICE_GPU=${v}`);
  for (const v of ["1", "yes", "On"]) t.equal(loadConfig({ SERVICE_GPU: v }).gpu, "auto", `SERVICE_GPU=${v}`);
});

t.test("~ in SERVICE_MODELS is the home directory", async (t) => {
  t.equal(loadConfig({ HOME: "/home/u", SERVICE_MODELS: "~/.ollama/models" }).models, "/home/u/.ollama/models");
  t.equal(loadConfig({ HOME: "/home/u", SERVICE_MODELS: "~" }).models, "/home/u");
  t.equal(loadConfig({ HOME: "/home/u", OLLAMA_MODELS: "~/m" }).models, "/home/u/m", "through the alias too");
  t.equal(loadConfig({ HOME: "/home/u", SERVICE_MODELS: "/srv/~x" }).models, "/srv/~x");
});

t.test("Ollama's variables are aliases when the SERVICE_* one is unset", async (t) => {
  const c = loadConfig({
    OLLAMA_HOST: "127.0.0.1:21434", OLLAMA_MODELS: "/o", OLLAMA_KEEP_ALIVE: "1h", OLLAMA_NUM_PARALLEL: "3", OLLAMA_MAX_LOADED_MODELS: "2",
    OLLAMA_MAX_QUEUE: "7", OLLAMA_CONTEXT_LENGTH: "2048", OLLAMA_ORIGINS: "https://a.example", OLLAMA_LOAD_TIMEOUT: "2m", OLLAMA_DEBUG: "1",
  });
  t.same(c.listen, { host: "127.0.0.1", port: 21434 });
  t.equal(c.models, "/o");
  t.equal(c.keepAliveMs, 3_600_000);
  t.equal(c.numParallel, 3);
  t.equal(c.maxLoadedModels, 2);
  t.equal(c.maxQueue, 7);
  t.equal(c.contextLength, 2048);
  t.same(c.origins, ["https://a.example"]);
  t.equal(c.loadTimeoutMs, 120_000);
  t.equal(c.logLevel, "debug");
  const s = loadConfig({ OLLAMA_HOST: "127.0.0.1:21434", SERVICE_HOST: "127.0.0.1:5", OLLAMA_DEBUG: "0" });
  t.same(s.listen, { host: "127.0.0.1", port: 5 }, "SERVICE_* wins");
  t.equal(s.logLevel, "info", "OLLAMA_DEBUG=0 changes nothing");
  t.throws(() => loadConfig({ OLLAMA_NUM_PARALLEL: "x" }), { name: "ConfigError", variable: "SERVICE_NUM_PARALLEL" });
});

t.test("only the environment passed in is read, never process.env behind it", async (t) => {
  // env-schema merges process.env by default: an empty SERVICE_THREADS= in the daemon's own
  // environment was read as "" and refused ("must be integer") though the argument had no such key.
  const saved = { threads: process.env.SERVICE_THREADS, gpu: process.env.SERVICE_GPU };
  process.env.SERVICE_THREADS = "";
  process.env.SERVICE_GPU = "metal";
  t.teardown(() => {
    for (const [k, v] of [["SERVICE_THREADS", saved.threads], ["SERVICE_GPU", saved.gpu]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
  const c = loadConfig({});
  t.equal(c.threads, undefined);
  t.equal(c.gpu, "auto");
});

t.test("messages are for people: a duration in words, an enum's values, no regular expression", async (t) => {
  for (const name of [
    "SERVICE_KEEP_ALIVE",
    "SERVICE_SHUTDOWN_TIMEOUT",
    "SERVICE_LOAD_TIMEOUT",
    "SERVICE_WRITE_TIMEOUT",
    "SERVICE_RENDER_TIMEOUT",
    "SERVICE_STREAM_INTERVAL",
  ]) {
    const err = t.throws(() => loadConfig({ [name]: "5 minutes" })) as Error;
    t.equal(err.message, `invalid configuration: ${name}: '5 minutes' is not a duration (examples: 30s, 5m, 1h, 300)`, name);
    t.notMatch(err.message, /pattern|\^|\[0-9\]/, `${name}: no regular expression in the message`);
  }
  const viaAlias = t.throws(() => loadConfig({ OLLAMA_KEEP_ALIVE: "5 minutes" })) as Error;
  t.match(viaAlias.message, /SERVICE_KEEP_ALIVE: '5 minutes' is not a duration/, "an alias's value is checked the same way");
  const gpu = t.throws(() => loadConfig({ SERVICE_GPU: "rocm" })) as Error;
  t.notMatch(gpu.message, /allowed values/);
  t.match(gpu.message, /'rocm' is not one of auto, cuda, vulkan, false/);
});

t.test("a misspelled SERVICE_* or OLLAMA_* name is reported with the nearest known name", async (t) => {
  const found = unknownVariables({
    SERVICE_KEEPALIVE: "10m",
    OLLAMA_NUM_PARALEL: "4",
    service_host: "0.0.0.0",
    SERVICE_LOGLEVEL: "debug",
    OLLAMA_SCHED_SPREAD: "1",
    SERVICE_HOST: "127.0.0.1:1",
    OLLAMA_HOST: "x",
    OLLAMA_DEBUG: "1",
    OLLAMA_NOHISTORY: "1",
    PATH: "/usr/bin",
    HOME: "/root",
    SERVER_HOST: "elsewhere",
  });
  t.same(
    found.map((u) => [u.variable, u.suggestion]),
    [
      ["OLLAMA_NUM_PARALEL", "OLLAMA_NUM_PARALLEL"],
      ["OLLAMA_SCHED_SPREAD", undefined],
      ["SERVICE_KEEPALIVE", "SERVICE_KEEP_ALIVE"],
      ["SERVICE_LOGLEVEL", "SERVICE_LOG_LEVEL"],
      ["service_host", "SERVICE_HOST"],
    ],
    "known names, other prefixes and variables of other programs are left alone",
  );
  t.equal(found.find((u) => u.variable === "SERVICE_KEEPALIVE")?.message, "unknown variable SERVICE_KEEPALIVE is ignored; did you mean SERVICE_KEEP_ALIVE?");
  t.match(found.find((u) => u.variable === "OLLAMA_SCHED_SPREAD")?.message, /^unknown variable OLLAMA_SCHED_SPREAD is ignored/);
  t.same(unknownVariables(Object.fromEntries(Object.keys(VARIABLES).map((k) => [k, "x"]))), [], "every variable of record is known");
});
