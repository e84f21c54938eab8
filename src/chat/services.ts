/**
 * What the chat engine works with: the configuration, the model store and the scheduler. Built
 * once by `app.ts`; the routes are given the same object.
 */
import type { Config } from "../config.js";
import type { ModelStore } from "../store/store.js";
import type { Scheduler } from "../scheduler/scheduler.js";

export interface Services {
  config: Readonly<Config>;
  store: ModelStore;
  scheduler: Scheduler;
  version: string;
}
