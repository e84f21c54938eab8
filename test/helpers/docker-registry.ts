/**
 * Debian's `docker-registry` (the CNCF distribution registry) started by a test: TLS with a
 * certificate from a CA the test made with openssl, htpasswd Basic authentication (bcrypt), or
 * pull-through proxy mode in front of another registry. Its access log (stdout) is collected.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { Agent, request } from "undici";
import type { Test } from "tap";
import { freePort } from "../gateway/helpers.js";

export interface TestCa {
  /** The CA's certificate (PEM file): what SERVICE_REGISTRY_CA names. */
  ca: string;
  /** A server certificate and key for 127.0.0.1 and localhost, signed by the CA. */
  cert: string;
  key: string;
}

/** A CA and a certificate it signed for 127.0.0.1/localhost, in `dir`. */
export function makeCa(dir: string): TestCa {
  const f = (name: string) => path.join(dir, name);
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  execFileSync("openssl", ["req", "-x509", ...ec, "-days", "2", "-subj", "/CN=lmd test CA", "-keyout", f("ca.key"), "-out", f("ca.pem")], { stdio: "ignore" });
  execFileSync("openssl", ["req", ...ec, "-subj", "/CN=127.0.0.1", "-keyout", f("server.key"), "-out", f("server.csr")], { stdio: "ignore" });
  writeFileSync(f("server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n");
  execFileSync(
    "openssl",
    [
      "x509",
      "-req",
      "-in",
      f("server.csr"),
      "-CA",
      f("ca.pem"),
      "-CAkey",
      f("ca.key"),
      "-CAcreateserial",
      "-days",
      "2",
      "-extfile",
      f("server.ext"),
      "-out",
      f("server.pem"),
    ],
    { stdio: "ignore" },
  );
  return { ca: f("ca.pem"), cert: f("server.pem"), key: f("server.key") };
}

/** An htpasswd file (bcrypt, as distribution requires) with one user. */
export function makeHtpasswd(file: string, user: string, password: string): void {
  const line = execFileSync("htpasswd", ["-Bbn", user, password], { encoding: "utf8" }).trim();
  writeFileSync(file, `${line}\n`);
}

export interface DistributionOptions {
  tls: TestCa;
  /** htpasswd file: Basic authentication required. */
  htpasswd?: string;
  /** Proxy mode: the registry this one mirrors, and the credentials it uses there. */
  proxy?: { remoteurl: string; username?: string; password?: string };
}

export interface Distribution {
  /** `127.0.0.1:<port>` */
  host: string;
  url: string;
  /** Access-log lines so far (stdout), one request each. */
  accessLog(): string[];
  /** Everything it wrote. */
  output(): string;
  stop(): Promise<void>;
}

/** Starts `docker-registry` on a free loopback port with its own storage under `dir`. */
export async function startDistribution(t: Test, binary: string, dir: string, options: DistributionOptions): Promise<Distribution> {
  await mkdir(path.join(dir, "data"), { recursive: true });
  const port = await freePort();
  const lines = [
    "version: 0.1",
    "log:",
    "  level: info",
    "  accesslog:",
    "    disabled: false",
    "storage:",
    "  filesystem:",
    `    rootdirectory: ${path.join(dir, "data")}`,
    "  delete:",
    "    enabled: true",
    "http:",
    `  addr: 127.0.0.1:${port}`,
    "  secret: lmd-test-secret",
    "  tls:",
    `    certificate: ${options.tls.cert}`,
    `    key: ${options.tls.key}`,
  ];
  if (options.htpasswd) lines.push("auth:", "  htpasswd:", "    realm: lmd-test", `    path: ${options.htpasswd}`);
  if (options.proxy) {
    lines.push("proxy:", `  remoteurl: ${options.proxy.remoteurl}`);
    if (options.proxy.username !== undefined) lines.push(`  username: ${options.proxy.username}`, `  password: ${options.proxy.password ?? ""}`);
  }
  const configFile = path.join(dir, "config.yml");
  writeFileSync(configFile, `${lines.join("\n")}\n`);
  // The registry is a Go program: SSL_CERT_FILE is the trust it uses for its upstream (proxy mode).
  const child: ChildProcess = spawn(binary, ["serve", configFile], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", SSL_CERT_FILE: options.tls.ca },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let stdout = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => {
    out += d;
    stdout += d;
  });
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exited;
  };
  t.teardown(stop);
  const url = `https://127.0.0.1:${port}`;
  const agent = new Agent({ connect: { ca: readFileSync(options.tls.ca, "utf8") } });
  t.teardown(() => agent.close());
  const end = Date.now() + 30_000;
  for (;;) {
    const status = await request(`${url}/v2/`, { dispatcher: agent }).then(async (r) => {
      await r.body.dump();
      return r.statusCode;
    }, () => 0);
    if (status === 200 || status === 401) break;
    if (child.exitCode !== null || Date.now() > end) throw new Error(`docker-registry did not start: ${out.slice(-1000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  // Access-log lines are Apache's combined format: `<addr> - <user> [<time>] "<request>" ...`.
  const accessLog = () => stdout.split("\n").filter((l) => /^\S+ - \S+ \[[^\]]+\] "/.test(l));
  return { host: `127.0.0.1:${port}`, url, accessLog, output: () => out, stop };
}
