/**
 * What route handlers are given: the services they call. Built once by `app.ts`.
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
