/**
 * Helpers for the gateway and nginx tests: fork the built `lmd gateway` as systemd would, make
 * self-signed certificates with openssl, speak HTTPS with a private CA, and find system tools.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import type { Test } from "tap";
import { Agent, fetch as undiciFetch } from "undici";
import { forkLmd, type ForkedLmd } from "../helpers/process.js";

export interface ForkedGateway extends ForkedLmd {
  /** `http(s)://127.0.0.1:<port>` once listening. */
  url: string;
}

/** Spawns `lmd gateway` with `env` (over a minimal environment); waits until it listens unless told not to. */
export async function forkGateway(t: Test, env: Record<string, string>, options: { waitListening?: boolean } = {}): Promise<ForkedGateway> {
  const gateway = forkLmd(t, ["gateway"], { GATEWAY_HOST: "127.0.0.1:0", ...env });
  let url = "";
  if (options.waitListening !== false) {
    const listening = await gateway.waitForLog((l) => l.msg === "lmd gateway listening", { timeoutMs: 20_000 });
    url = `${listening.tls === true ? "https" : "http"}://127.0.0.1:${String(listening.port)}`;
  }
  return { ...gateway, url };
}

/** Writes a self-signed certificate for localhost/127.0.0.1 with openssl; returns the file paths. */
export function makeCert(dir: string, name: string, cn = "localhost"): { cert: string; key: string } {
  const cert = path.join(dir, `${name}.crt`);
  const key = path.join(dir, `${name}.key`);
  execFileSync("openssl", [
    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
    "-subj", `/CN=${cn}`, "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key, "-out", cert,
  ], { stdio: "ignore" });
  return { cert, key };
}

/** A fetch that trusts `ca` (self-signed certificates, PEM) for HTTPS; answers global `Response`s. */
export function fetchTrusting(ca: string | Buffer): { fetch: (url: string, init?: RequestInit) => Promise<Response>; agent: Agent } {
  const agent = new Agent({ connect: { ca } });
  const f = async (url: string, init: RequestInit = {}): Promise<Response> => {
    // undici's own fetch takes its Agent as the dispatcher; rewrap its answer as a global Response
    // (same body stream, not buffered) so that the shared helpers' instanceof checks hold.
    const r = await undiciFetch(url, { ...(init as object), dispatcher: agent });
    return new Response(r.body as ReadableStream<Uint8Array> | null, { status: r.status, statusText: r.statusText, headers: [...r.headers] });
  };
  return { fetch: f, agent };
}

/**
 * The path of a system tool, or undefined. When it is missing the test fails with a clear message,
 * unless LMD_SKIP_SYSTEM_TESTS=1, when it is skipped with the reason.
 */
export function requireTool(t: Test, tool: string, pkg: string): string | undefined {
  const found = ["/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/sbin", "/usr/local/bin"].map((d) => path.join(d, tool)).find((p) => existsSync(p));
  if (found) return found;
  const reason = `${tool} is not installed (Debian package '${pkg}'; CI installs it with apt-get)`;
  if (process.env.LMD_SKIP_SYSTEM_TESTS === "1") t.skip(`${reason}; skipped because LMD_SKIP_SYSTEM_TESTS=1`);
  else t.fail(`${reason}; set LMD_SKIP_SYSTEM_TESTS=1 to skip this test`);
  return undefined;
}

/** Runs a command synchronously; returns status and combined output. */
export function runTool(cmd: string, args: string[], input?: string): { status: number | null; output: string } {
  const r = spawnSync(cmd, args, { encoding: "utf8", input, timeout: 30_000 });
  return { status: r.status, output: `${r.stdout ?? ""}${r.stderr ?? ""}` };
}

/** Reads an NDJSON body as it arrives, one object at a time. */
export async function* ndjsonLines(body: ReadableStream<Uint8Array>): AsyncGenerator<Record<string, unknown>> {
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (line !== "") yield JSON.parse(line) as Record<string, unknown>;
    }
  }
  if (buf.trim() !== "") yield JSON.parse(buf) as Record<string, unknown>;
}

/** Tokens per second of the tiny model on this machine, from a short generation's own stats. */
export async function tokensPerSecond(url: string, headers: Record<string, string> = {}): Promise<number> {
  const res = await fetch(`${url}/api/generate`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: "tiny", prompt: "warm up", stream: false, options: { num_predict: 16, temperature: 1, seed: 1 } }),
  });
  const body = (await res.json()) as { eval_count?: number; eval_duration?: number };
  if (!body.eval_count || !body.eval_duration) throw new Error(`warm-up generation failed: ${JSON.stringify(body)}`);
  return body.eval_count / (body.eval_duration / 1e9);
}

/** A fresh temporary directory, removed on teardown (independent of .tap/fixtures). */
export function tempDir(t: Test): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lmd-gw-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A TCP port free on 127.0.0.1 right now (for servers such as nginx that cannot take port 0). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Resolves once something accepts connections on 127.0.0.1:`port` (bounded). */
export async function waitForPort(port: number, timeoutMs = 15_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, "127.0.0.1", () => {
        socket.destroy();
        resolve(true);
      });
      socket.on("error", () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
