/**
 * A runner's CPU threads while it serves, when SERVICE_THREADS is not set.
 *
 * A load takes the cores that are free when it starts (src/cpu.ts). A neighbour that arrives later
 * (a build, another model's runner, a backup) shares the cores of llama.cpp's threads, which meet
 * at spinning barriers: one thread time-sliced against the neighbour holds all the others back, and
 * decoding collapses (docs/benchmarks/history.md, "Threads on a busy machine"). So while it
 * generates, a runner looks again once a second:
 *
 * - **Fewer threads** when one of its decoding threads waited for a CPU for at least
 *   {@link CONTENDED} of its time and other processes were busy (at least {@link OTHERS_BUSY} CPUs):
 *   one fewer, or the load rule's count if that is lower. The decoding threads are the ones that
 *   ran most (as many as it decodes with); their wait is the kernel's run-queue delay
 *   (/proc/self/task/<tid>/schedstat). Waiting is what collapses a barrier, and it shows even where
 *   the neighbour's own share is squeezed (a hog pinned to one core gets half of it).
 * - **More threads** when the other processes leave room for at least {@link ROOM} of a core more
 *   than it uses: the load rule's count, at least one more, never more than the usable cores.
 *
 * "Other processes" are the busy time of the CPUs the runner may run on (/proc/stat) less the
 * runner's and its daemon's (/proc/<pid>/stat): the daemon's work is the runner's own doing, its
 * clients and other runners are not. After a change the next second is not judged (it straddles
 * the change). SERVICE_THREADS set to a number turns this off.
 */
import { readdirSync, readFileSync } from "node:fs";
import { chooseThreads, cpuTimesSync } from "../cpu.js";

/** A decoding thread that waited this much of its time for a CPU is contended. */
export const CONTENDED = 0.2;
/** Other processes' busy CPUs that make a contended thread somebody else's doing, not the runner's own. */
export const OTHERS_BUSY = 0.3;
/** Free room, in cores beyond the threads in use, that one more thread needs. */
export const ROOM = 0.6;

/** One look at the CPUs: jiffies of every CPU and of lmd (this runner and its daemon), each thread's run and wait (ns). */
export interface CpuSample {
  at: number;
  busy: number;
  total: number;
  cpus: number;
  own: number;
  threads: Map<string, { run: number; wait: number }>;
}

/** What two samples say: other processes' busy CPUs, and the decoding threads' wait. */
export interface Load {
  others: number;
  /** The largest share of its time that one of the `threads` busiest threads waited for a CPU. */
  wait: number;
  /** Whether those threads ran (or waited to) for at least half of the window: a generation went on. */
  decoding: boolean;
}

/** A process's user and system time in clock ticks (fields 14 and 15 of /proc/<pid>/stat); 0 when it is gone. */
function cpuTicks(pid: string): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(") ") + 2).split(" "); // the command may hold ") "
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

/** The CPUs, lmd's time and this process's threads now. */
export function sample(): CpuSample {
  const { busy, total, cpus } = cpuTimesSync();
  const own = cpuTicks("self") + cpuTicks(String(process.ppid));
  const threads = new Map<string, { run: number; wait: number }>();
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      const [run, wait] = readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ").map(Number);
      threads.set(tid, { run: run ?? 0, wait: wait ?? 0 });
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return { at: performance.now(), busy, total, cpus, own, threads };
}

/** The load between two samples, for a runner decoding with `threads` threads. */
export function loadBetween(a: CpuSample, b: CpuSample, threads: number): Load {
  const elapsed = (b.total - a.total) / Math.max(1, b.cpus); // jiffies per CPU
  const others = elapsed > 0 ? Math.max(0, (b.busy - a.busy - (b.own - a.own)) / elapsed) : 0;
  const deltas = [...b.threads].map(([tid, t]) => {
    const before = a.threads.get(tid) ?? { run: 0, wait: 0 };
    return { run: t.run - before.run, wait: t.wait - before.wait };
  });
  const busiest = deltas.sort((x, y) => y.run - x.run).slice(0, threads);
  const wait = Math.max(0, ...busiest.map((t) => (t.run + t.wait > 0 ? t.wait / (t.run + t.wait) : 0)));
  const windowNs = (b.at - a.at) * 1e6;
  const decoding = busiest.length > 0 && busiest[0]!.run + busiest[0]!.wait >= windowNs / 2;
  return { others, wait, decoding };
}

/** The threads to decode with next, from the threads now, the usable cores and the load (this file's comment). */
export function nextThreads(current: number, usable: number, load: Load): number {
  if (current > 1 && load.decoding && load.wait >= CONTENDED && load.others >= OTHERS_BUSY) {
    return Math.max(1, Math.min(current - 1, chooseThreads(usable, load.others)));
  }
  if (current < usable && usable - load.others >= current + ROOM) return Math.min(usable, Math.max(current + 1, chooseThreads(usable, load.others)));
  return current;
}

export interface GovernorOptions {
  usable: number;
  threads: number;
  /** Whether a job runs now; the governor looks only then. */
  active(): boolean;
  /** Makes the contexts decode with `threads` from their next decode on. */
  apply(threads: number): Promise<void>;
  log(msg: string, data: Record<string, unknown>): void;
  /** How it looks and how often (tests give their own). */
  sample?: () => CpuSample;
  intervalMs?: number;
}

/** Looks at the load once a second while jobs run, and changes the threads by {@link nextThreads}. */
export class ThreadGovernor {
  threads: number;
  private timer: NodeJS.Timeout | undefined;
  private last: CpuSample | undefined;
  private skip = false;
  private applying = false;
  private unreadable = false;

  constructor(private readonly options: GovernorOptions) {
    this.threads = options.threads;
  }

  /** A job started: look while jobs run. */
  wake(): void {
    if (this.timer || this.unreadable) return;
    this.last = this.look();
    if (!this.last) return;
    this.timer = setInterval(() => this.tick(), this.options.intervalMs ?? 1000);
    this.timer.unref();
  }

  /** A sample, or undefined for good where /proc cannot be read (the threads then stay as loaded). */
  private look(): CpuSample | undefined {
    try {
      return (this.options.sample ?? sample)();
    } catch (err) {
      this.unreadable = true;
      this.stop();
      this.options.log("threads stay as loaded: the CPUs' load cannot be read", { err: String(err) });
      return undefined;
    }
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    if (!this.options.active()) return this.stop();
    if (this.applying) return;
    const now = this.look();
    if (!now) return;
    const before = this.last!;
    this.last = now;
    if (this.skip) {
      this.skip = false;
      return;
    }
    const load = loadBetween(before, now, this.threads);
    const next = nextThreads(this.threads, this.options.usable, load);
    if (next === this.threads) return;
    const from = this.threads;
    this.threads = next;
    this.applying = true;
    this.skip = true;
    this.options
      .apply(next)
      .then(
        () => this.options.log("threads changed", { from, to: next, others: round(load.others), wait: round(load.wait) }),
        (err: unknown) => {
          this.threads = from;
          this.options.log("threads not changed", { from, to: next, err: String(err) });
        },
      )
      .finally(() => (this.applying = false));
  }
}

const round = (n: number) => Math.round(n * 100) / 100;
