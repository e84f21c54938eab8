/**
 * Speaking to systemd: sd_notify(3) (readiness, status, reload, stop, watchdog) and whether stdout
 * is the journal. Outside systemd (no NOTIFY_SOCKET, no JOURNAL_STREAM) everything here is a no-op.
 *
 * Node has no Unix datagram sockets, so the datagrams are sent by a small N-API addon
 * (src/native/systemd.c, built by scripts/build-native) from the daemon's own process: the unit's
 * NotifyAccess=main accepts only the main PID, and a helper process (systemd-notify) would be
 * another PID that may exit before systemd can tell which unit it belongs to.
 */
import { fstatSync } from "node:fs";
import { createRequire } from "node:module";

interface Addon {
  notify(socket: string, message: string): number;
  journal(entry: Buffer | string): number;
}

let addon: Addon | null | undefined;

/** The addon, or null when it was not built (no C compiler); loaded on first use. */
export function systemdAddon(): Addon | null {
  if (addon !== undefined) return addon;
  try {
    addon = createRequire(import.meta.url)("../native/lmd-systemd.node") as Addon;
  } catch {
    addon = null;
  }
  return addon;
}

/** Sends sd_notify lines; one instance per process, built from the environment systemd set. */
export class Notifier {
  private status = "";
  /** starting until READY=1, stopping from STOPPING=1: a reload or a status tick never undoes either. */
  private phase: "starting" | "ready" | "stopping" = "starting";
  private watchdogTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly socket: string | undefined,
    /** WATCHDOG_USEC in microseconds, when the watchdog is on for this process. */
    readonly watchdogUsec: number | undefined,
    private readonly onError: (message: string) => void = () => {},
  ) {}

  static fromEnv(env: NodeJS.ProcessEnv, onError?: (message: string) => void): Notifier {
    const socket = env.NOTIFY_SOCKET || undefined;
    const usec = Number(env.WATCHDOG_USEC);
    // WATCHDOG_PID names the process meant (a child started with the environment must not ping).
    const forUs = env.WATCHDOG_PID === undefined || Number(env.WATCHDOG_PID) === process.pid;
    const watchdog = socket && forUs && Number.isSafeInteger(usec) && usec > 0 ? usec : undefined;
    return new Notifier(socket, watchdog, onError);
  }

  get enabled(): boolean {
    return this.socket !== undefined;
  }

  /** Sends one message (lines `KEY=value`); returns false when it could not be sent. */
  send(message: string): boolean {
    if (!this.socket) return false;
    const sd = systemdAddon();
    if (!sd) {
      this.onError("NOTIFY_SOCKET is set but dist/native/lmd-systemd.node is missing: systemd is not told the daemon's state");
      return false;
    }
    const rc = sd.notify(this.socket, message);
    if (rc !== 0) this.onError(`sd_notify failed (errno ${-rc})`);
    return rc === 0;
  }

  get ready(): boolean {
    return this.phase === "ready";
  }

  /** READY=1 (at the end of the start, or of a reload), with the status line. */
  sendReady(status?: string): void {
    if (this.phase === "stopping") return;
    this.phase = "ready";
    this.send(status === undefined ? "READY=1" : `READY=1\nSTATUS=${oneLine(status)}`);
    if (status !== undefined) this.status = oneLine(status);
  }

  /** STATUS=, sent only when it changed (and not once stopping). */
  setStatus(status: string): void {
    const line = oneLine(status);
    if (line === this.status || this.phase === "stopping") return;
    this.status = line;
    this.send(`STATUS=${line}`);
  }

  /** RELOADING=1; only once ready (a reload during the start or the stop is not announced). */
  reloading(): void {
    if (this.phase !== "ready") return;
    // MONOTONIC_USEC: newer systemd (notify-reload) matches it to the reload; older ignores it.
    this.send(`RELOADING=1\nMONOTONIC_USEC=${monotonicUsec()}`);
  }

  stopping(status?: string): void {
    this.phase = "stopping";
    this.send(status === undefined ? "STOPPING=1" : `STOPPING=1\nSTATUS=${oneLine(status)}`);
  }

  /**
   * WATCHDOG=1 at half WATCHDOG_USEC from a timer on the event loop: a loop that is stuck (or a
   * stopped process) sends nothing, and systemd kills and restarts the service.
   */
  startWatchdog(): void {
    if (this.watchdogUsec === undefined || this.watchdogTimer) return;
    const every = Math.max(1, Math.floor(this.watchdogUsec / 2000));
    this.send("WATCHDOG=1");
    this.watchdogTimer = setInterval(() => this.send("WATCHDOG=1"), every);
    this.watchdogTimer.unref();
  }

  stopWatchdog(): void {
    clearInterval(this.watchdogTimer);
    this.watchdogTimer = undefined;
  }
}

function oneLine(s: string): string {
  return s.replace(/[\r\n]+/g, " ").slice(0, 200);
}

function monotonicUsec(): bigint {
  return process.hrtime.bigint() / 1000n;
}

/**
 * True when stdout is a stream to the journal: systemd sets JOURNAL_STREAM to the device and inode
 * of that stream ("dev:ino"), and a redirection (`lmd serve > file`) changes them.
 */
export function stdoutIsJournal(env: NodeJS.ProcessEnv): boolean {
  const m = /^(\d+):(\d+)$/.exec(env.JOURNAL_STREAM ?? "");
  if (!m) return false;
  try {
    const st = fstatSync(1, { bigint: true });
    return st.dev === BigInt(m[1]!) && st.ino === BigInt(m[2]!);
  } catch {
    return false;
  }
}
