/**
 * Runner child process entry: speaks the IPC protocol with the parent (runner/protocol.ts), and
 * nothing else. Each message becomes a load (load.ts), a job of its kind (one module per kind, all
 * started and ended by job.ts's `withJob`), or a word to the jobs that run (cancel, pause, resume).
 * This directory is the only place that imports node-llama-cpp for the runner: a native crash here
 * kills only this process, and the parent turns it into a 500.
 *
 * Signals: the daemon's process group may receive SIGINT/SIGTERM (Ctrl+C, systemd). The runner
 * ignores them and stops only when told (`unload`) or when the parent's IPC channel closes.
 */
import type { FromRunner, ToRunner } from "../protocol.js";
import { Outbox } from "../outbox.js";
import type { ChildIo } from "./io.js";
import { JobTable, type JobHost } from "./job.js";
import { loadModel } from "./load.js";
import { outOfMemory, type LoadedModel } from "./model.js";
import { runGenerate } from "./generate.js";
import { runChat } from "./chat.js";
import { runEmbed } from "./embed.js";
import { runRank } from "./rank.js";
import { runRender } from "./render.js";
import { runDetokenize, runTokenize } from "./tokenize.js";

let loaded: LoadedModel | undefined;
/** Resolves the wait after an `estimate` message (the parent's `admit`). */
let admit: (() => void) | undefined;
const jobs = new JobTable();

function post(msg: FromRunner): void {
  if (process.connected) process.send?.(msg);
}

/** Output after a job's first is gathered for SERVICE_STREAM_INTERVAL (runner/outbox.ts). */
const outbox = new Outbox({
  post,
  now: () => performance.now(),
  setTimer: (callback, ms) => setTimeout(callback, ms),
  clearTimer: (timer) => clearTimeout(timer as NodeJS.Timeout),
  busy: () => loaded?.decodeLoop.busy === true,
});

const io: ChildIo = {
  send: (msg) => outbox.send(msg),
  log: (level, msg, data) => outbox.send({ type: "log", level, msg, ...(data ? { data } : {}) }),
};

const host: JobHost = { io, jobs, loaded: () => loaded, outOfMemory };

async function load(msg: Extract<ToRunner, { type: "load" }>): Promise<void> {
  const admitted = () => new Promise<void>((resolve) => (admit = resolve));
  loaded = await loadModel(msg.spec, { io, outbox, admitted });
}

async function unload(): Promise<void> {
  loaded?.stopGoverning();
  // An aborted job still finishes its current step; disposing the context under it throws
  // DisposedError from inside node-llama-cpp. Aborted, each job ends within a token or so.
  await jobs.abortAll();
  const l = loaded;
  loaded = undefined;
  await l?.dispose();
}

async function exitCleanly(code: number): Promise<void> {
  await unload();
  process.exit(code);
}

function onMessage(msg: ToRunner): void {
  switch (msg.type) {
    case "load":
      void load(msg);
      break;
    case "generate":
      void runGenerate(host, msg.id, msg.job);
      break;
    case "chat":
      void runChat(host, msg.id, msg.job);
      break;
    case "embed":
      void runEmbed(host, msg.id, msg.job);
      break;
    case "render":
      void runRender(host, msg.id, msg.job);
      break;
    case "tokenize":
      void runTokenize(host, msg.id, { text: msg.text, addSpecial: msg.addSpecial === true, parseSpecial: msg.parseSpecial !== false });
      break;
    case "detokenize":
      void runDetokenize(host, msg.id, msg.tokens);
      break;
    case "rank":
      void runRank(host, msg.id, msg.job);
      break;
    case "cancel":
      jobs.cancel(msg.id);
      break;
    case "pause":
      jobs.pause(msg.id);
      break;
    case "resume":
      jobs.resume(msg.id);
      break;
    case "admit":
      admit?.();
      admit = undefined;
      break;
    case "unload":
      void exitCleanly(0);
      break;
  }
}

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(signal, () => io.log("debug", `runner ignored ${signal}; it stops when the daemon tells it to`));
}
process.on("message", (msg) => onMessage(msg as ToRunner));
// The daemon is gone (crashed, SIGKILLed): nobody can use this model any more.
process.on("disconnect", () => void exitCleanly(0));
