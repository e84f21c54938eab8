/**
 * Flash attention for a load (src/runner/attention.ts): "auto" is off for a model on the CPU whose
 * heads are narrower than 64 values (ggml's CPU kernels compute those value by value), and stays
 * llama.cpp's "auto" for wider heads, on a GPU, with a quantized cache, or when set explicitly. The
 * memory estimate counts the setting the context will be made with. Real GGUF headers from make-model.
 */
import t from "tap";
import { getLlama, GgufInsights, readGgufFileInfo } from "node-llama-cpp";
import { flashAttentionFor, headWidth } from "../../src/runner/attention.js";
import { estimateLoad } from "../../src/runner/estimate.js";
import { testGguf } from "../helpers/models.js";

t.test("auto is off on the CPU for narrow heads only", async (t) => {
  const llama = await getLlama({ gpu: false, build: "never", progressLogs: false });
  const insightsOf = async (file: string) => GgufInsights.from(await readGgufFileInfo(file), llama);
  const demo = await insightsOf(await testGguf({ preset: "demo", seed: 42 }));
  const wide = await insightsOf(await testGguf({ preset: "tiny", embeddingLength: 256, heads: 4, kvHeads: 4 }));
  t.equal(headWidth(demo), 32, "the demo model's heads are 32 wide");
  t.equal(headWidth(wide), 64, "a model of 256 / 4 heads: 64 wide");

  t.equal(flashAttentionFor({ flashAttention: "auto" }, demo, 0), false, "demo on the CPU: off");
  t.equal(flashAttentionFor({}, demo, 0), false, "demo on the CPU, no setting: off");
  t.equal(flashAttentionFor({ flashAttention: "auto" }, wide, 0), "auto", "64-wide heads on the CPU: llama.cpp's auto");
  t.equal(flashAttentionFor({ flashAttention: "auto" }, demo, 3), "auto", "layers on a GPU: llama.cpp's auto");
  t.equal(flashAttentionFor({ flashAttention: true }, demo, 0), true, "set on: on");
  t.equal(flashAttentionFor({ flashAttention: "auto", kvCacheType: "q8_0" }, demo, 0), "auto", "a quantized cache is never turned off");

  const spec = { path: "", contextSize: 2048, sequences: 4, threads: 1 };
  const file = await testGguf({ preset: "demo", seed: 42 });
  const auto = await estimateLoad(llama, { ...spec, path: file, flashAttention: "auto" } as never);
  const off = await estimateLoad(llama, { ...spec, path: file, flashAttention: false } as never);
  const on = await estimateLoad(llama, { ...spec, path: file, flashAttention: true } as never);
  t.not(on.ramBytes, off.ramBytes, `the estimate depends on the setting (on ${on.ramBytes}, off ${off.ramBytes})`);
  t.equal(auto.ramBytes, off.ramBytes, "auto is estimated as the context is made: without flash attention");
});
