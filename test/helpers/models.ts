/**
 * Test models: GGUF files written by make-model (cached per process, keyed by their options)
 * and installed into a store under a name.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { makeModel, type MakeModelOptions } from "../../src/gguf/make-model.js";
import { installGguf, type InstallOptions } from "../../src/store/install.js";
import type { ModelStore } from "../../src/store/store.js";

const CACHE = path.join(os.tmpdir(), `lmd-test-models-${process.getuid?.() ?? "u"}`);

/** Path of a generated GGUF for `options` (written once, then reused by every test in the run). */
export async function testGguf(options: MakeModelOptions = { preset: "tiny" }): Promise<string> {
  mkdirSync(CACHE, { recursive: true });
  const key = createHash("sha256").update(JSON.stringify(options)).digest("hex").slice(0, 16);
  const file = path.join(CACHE, `${options.preset ?? "tiny"}-${key}.gguf`);
  if (!existsSync(file)) await makeModel(file, options);
  return file;
}

export interface TestModel {
  name: string;
  make?: MakeModelOptions;
  install?: InstallOptions;
}

/** Installs each model into the store. */
export async function installTestModels(store: ModelStore, models: readonly TestModel[]): Promise<void> {
  for (const m of models) {
    const make = m.make ?? { preset: "tiny" };
    await installGguf(store, m.name, await testGguf(make), { fileType: (make.type ?? "q8_0").toUpperCase(), ...m.install });
  }
}
