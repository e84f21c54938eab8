/**
 * The demo model: on first start, an empty store gets a small generated model named `demo`, so
 * `npm start` serves something with no download. Its weights are random: its output is nonsense.
 */
import fs from "node:fs/promises";
import type { Logger } from "pino";
import { makeModel } from "../gguf/make-model.js";
import { installGguf, type InstallOptions } from "./install.js";
import type { ModelStore } from "./store.js";

export const DEMO_MODEL = "demo";

/**
 * Defaults stored with the demo model (its params layer, as a Modelfile's PARAMETER lines would be):
 * a random-weight model rarely samples end-of-generation, so answers are bounded to stay quick.
 */
export const DEMO_PARAMS = { num_predict: 48, temperature: 0.8 } as const;

export async function ensureDemoModel(store: ModelStore, log: Logger): Promise<void> {
  if (!(await store.isEmpty())) return;
  const started = Date.now();
  const tmp = `${store.tempPath()}.gguf`;
  try {
    const made = await makeModel(tmp, { preset: "demo", seed: 42, name: DEMO_MODEL });
    await installGguf(store, DEMO_MODEL, tmp, { params: DEMO_PARAMS, architecture: "llama", fileType: made.spec.type.toUpperCase() } satisfies InstallOptions);
    log.info({ model: DEMO_MODEL, parameters: made.parameters, bytes: made.bytes, ms: Date.now() - started }, "empty model store: wrote the demo model");
  } finally {
    await fs.rm(tmp, { force: true });
  }
}
