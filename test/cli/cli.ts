/**
 * Runs the built CLI (`node dist/src/main.js ...`) as a user would, asynchronously (the daemon of
 * startDaemon lives in the test's own event loop), and drives it in a real terminal with tmux.
 */
import { execFile, spawn, spawnSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type { Test } from "tap";
import { MAIN } from "../helpers/process.js";

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `lmd <args>` against `url`; `input` is piped to stdin (stdin is /dev/null otherwise). */
export function lmd(url: string, args: string[], options: { input?: string; timeoutMs?: number } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, ...args], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/root", SERVICE_HOST: url },
      stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    if (options.input !== undefined) child.stdin!.end(options.input);
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`lmd ${args.join(" ")} did not finish; stdout: ${stdout.slice(-300)} stderr: ${stderr.slice(-300)}`));
    }, options.timeoutMs ?? 60_000);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const execFileAsync = promisify(execFile);

/** A terminal session in a private tmux server (its own socket), killed on teardown. */
export interface Terminal {
  /** Sends keys as tmux names them (`Enter`, `C-c`) or literal text with `literal: true`. */
  keys(keys: string[], literal?: boolean): Promise<void>;
  /** The visible screen plus scrollback, as text. */
  screen(): Promise<string>;
  /** Waits until the screen matches; returns it. */
  waitFor(match: RegExp | ((screen: string) => boolean), timeoutMs?: number): Promise<string>;
  /** Exit status of the command once it has exited, else undefined. */
  exitStatus(): Promise<number | undefined>;
}

/** Whether tmux can be run here. */
function hasTmux(): boolean {
  return spawnSync("tmux", ["-V"], { stdio: "ignore" }).status === 0;
}

/**
 * Skip reason for terminal tests: only when tmux is missing AND LMD_SKIP_SYSTEM_TESTS=1 asks for it.
 * Without that variable a missing tmux fails the test with a message saying what to install.
 */
export const terminalSkip: string | false = !hasTmux() && process.env.LMD_SKIP_SYSTEM_TESTS === "1" ? "tmux is not installed (LMD_SKIP_SYSTEM_TESTS=1)" : false;

export interface TerminalOptions {
  /** HOME of the command (lmd keeps its REPL history in ~/.lmd/history); default a fresh private directory. */
  home?: string;
  /** Printed after the command exits, as a shell would print its prompt (shows where the cursor was left). */
  shellPrompt?: string;
  /** More environment variables for the command. */
  env?: Record<string, string>;
}

/**
 * Starts `lmd <args>` inside a new tmux session (a real pty) with SERVICE_HOST=url and `options.env`. HOME is a
 * private directory, so that nothing a test does lands in the real home (REPL history).
 */
export async function terminal(t: Test, url: string, args: string[], options: TerminalOptions = {}): Promise<Terminal> {
  if (!hasTmux()) throw new Error("tmux is not installed: apt-get install tmux (or set LMD_SKIP_SYSTEM_TESTS=1 to skip terminal tests)");
  // A short directory: a unix socket path must stay under 108 bytes (tap's fixture paths do not).
  const dir = await mkdtemp(path.join(os.tmpdir(), "lmd-tty-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const socket = path.join(dir, "sock");
  const conf = path.join(dir, "tmux.conf");
  // remain-on-exit keeps the pane (and its last screen) after the command exits.
  await writeFile(conf, "set -g remain-on-exit on\nset -g history-limit 5000\n");
  const tmux = (...a: string[]) => execFileAsync("tmux", ["-S", socket, "-f", conf, ...a], { env: { ...process.env, TMUX: "" } });
  // A shell records the exit status in a file when lmd ends (tmux's own pane status can lag behind).
  // `trap : INT` keeps that shell alive through Ctrl+C; lmd gets the default disposition and its own handler.
  const statusFile = path.join(dir, "status");
  const wrapper = 'trap : INT; "$@"; s=$?; printf "%s" "$LMD_TEST_SHELL_PROMPT"; echo $s > "$0.tmp" && mv "$0.tmp" "$0"';
  const home = options.home ?? path.join(dir, "home");
  await mkdir(home, { recursive: true });
  const env = [
    `SERVICE_HOST=${url}`,
    `HOME=${home}`,
    `LMD_TEST_SHELL_PROMPT=${options.shellPrompt ?? ""}`,
    ...Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`),
  ].flatMap((e) => ["-e", e]);
  await tmux("new-session", "-d", "-s", "lmd", "-x", "120", "-y", "40", ...env, "sh", "-c", wrapper, statusFile, process.execPath, MAIN, ...args);
  t.teardown(() => tmux("kill-server").catch(() => undefined));
  // -J joins the lines the terminal wrapped but keeps trailing blanks, cells erased with ESC[K
  // included (what a placeholder leaves behind): trimmed per line, the prompt reads ">>>".
  const screen = async () =>
    (await tmux("capture-pane", "-p", "-J", "-S", "-5000", "-t", "lmd")).stdout.split("\n").map((l) => l.trimEnd()).join("\n").trimEnd();
  return {
    async keys(keys, literal = false) {
      await tmux("send-keys", "-t", "lmd", ...(literal ? ["-l"] : []), ...keys);
    },
    screen,
    async waitFor(match, timeoutMs = 30_000) {
      const test = typeof match === "function" ? match : (s: string) => match.test(s);
      const deadline = Date.now() + timeoutMs;
      let last = "";
      while (Date.now() < deadline) {
        last = await screen();
        if (test(last)) return last;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`screen did not match ${String(match)} within ${timeoutMs} ms:\n${last}`);
    },
    async exitStatus() {
      const text = await readFile(statusFile, "utf8").catch(() => undefined);
      return text === undefined ? undefined : Number(text.trim());
    },
  };
}

/** Polls `check` every 100 ms until it holds or `timeoutMs` passes; then checks once more. */
export async function waitUntil(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return check();
}
