/**
 * The daemon's control socket under systemd: `control.sock` in the unit's RuntimeDirectory=
 * (/run/lmd, mode 0750, owned by the service user), on which `lmd reload` — the unit's
 * ExecReload= — asks for a reload and waits for its outcome. A plain SIGHUP reloads the same way
 * but cannot say whether the reload worked; through the socket, an invalid policy file makes
 * `systemctl reload lmd` fail.
 *
 * One request per connection: a JSON line `{"command":"reload","logLevel":...}` (at most
 * {@link MAX_REQUEST} bytes), answered with a JSON line `{"ok":true}` or `{"ok":false,"error":"..."}`.
 */
import { rmSync } from "node:fs";
import net from "node:net";
import path from "node:path";

export const MAX_REQUEST = 4096;

export interface ReloadRequest {
  command: "reload";
  /** SERVICE_LOG_LEVEL as the reloading command's environment has it (systemd re-reads EnvironmentFile=). */
  logLevel?: string;
}

export type ReloadAnswer = { ok: true } | { ok: false; error: string };

/** Where the control socket is: the first RuntimeDirectory= systemd named, else /run/lmd. */
export function controlSocketPath(env: NodeJS.ProcessEnv): string {
  const dir = env.RUNTIME_DIRECTORY?.split(":")[0] || "/run/lmd";
  return path.join(dir, "control.sock");
}

/** Listens on the control socket; resolves with a function that closes it (and removes the file). */
export async function listenControl(socketPath: string, reload: (request: ReloadRequest) => Promise<ReloadAnswer>): Promise<() => void> {
  // sun_path holds 107 bytes and a NUL; a longer path would be cut short where no client looks.
  if (Buffer.byteLength(socketPath) > 107) throw new Error(`${socketPath}: too long for a Unix socket's path`);
  rmSync(socketPath, { force: true }); // a socket left by a killed daemon
  const server = net.createServer((socket) => {
    let buffered = "";
    socket.setEncoding("utf8");
    socket.setTimeout(10_000, () => socket.destroy());
    socket.on("error", () => {});
    socket.on("data", (chunk: string) => {
      buffered += chunk;
      if (buffered.length > MAX_REQUEST) return void socket.end(`${JSON.stringify({ ok: false, error: "request too large" })}\n`);
      const newline = buffered.indexOf("\n");
      if (newline < 0) return;
      socket.removeAllListeners("data");
      socket.setTimeout(0);
      let request: ReloadRequest;
      try {
        request = JSON.parse(buffered.slice(0, newline)) as ReloadRequest;
        if (request.command !== "reload") throw new Error(`unknown command`);
      } catch (err) {
        return void socket.end(`${JSON.stringify({ ok: false, error: (err as Error).message })}\n`);
      }
      void reload(request).then((answer) => socket.end(`${JSON.stringify(answer)}\n`));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, () => resolve());
  });
  server.unref();
  return () => {
    server.close();
    rmSync(socketPath, { force: true });
  };
}

/** Sends a reload request and waits for the answer. */
export function requestReload(socketPath: string, request: ReloadRequest, timeoutMs: number): Promise<ReloadAnswer> {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection(socketPath);
    let answer = "";
    socket.setEncoding("utf8");
    socket.setTimeout(timeoutMs, () => {
      socket.destroy();
      reject(new Error(`no answer from the daemon within ${timeoutMs / 1000} s`));
    });
    socket.on("connect", () => socket.write(`${JSON.stringify(request)}\n`));
    socket.on("data", (chunk: string) => (answer += chunk));
    socket.on("error", (err: NodeJS.ErrnoException) => reject(new Error(`cannot reach the daemon at ${socketPath}: ${err.code ?? err.message}`)));
    socket.on("end", () => {
      try {
        resolve(JSON.parse(answer) as ReloadAnswer);
      } catch {
        reject(new Error("the daemon closed the control connection without an answer"));
      }
    });
  });
}
