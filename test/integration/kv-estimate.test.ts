/**
 * The memory check counts the KV cache's type: node-llama-cpp's estimate of a load, as the runner
 * makes it before loading, shrinks with a quantized cache (what lets memory-aware loading fit more).
 */
import t from "tap";
import { getLlama } from "node-llama-cpp";
import { estimateLoad } from "../../src/runner/estimate.js";
import type { LoadSpec } from "../../src/runner/types.js";
import { testGguf } from "../helpers/models.js";

t.test("a q8_0 or q4_0 cache is estimated smaller than f16", async (t) => {
  const llama = await getLlama({ gpu: false, build: "never", progressLogs: false });
  t.teardown(() => llama.dispose());
  const path = await testGguf({ preset: "demo" });
  const spec = (kvCacheType: LoadSpec["kvCacheType"]): LoadSpec => ({
    path,
    contextSize: 4096,
    sequences: 4,
    threads: 1,
    gpu: false,
    kvCacheType,
    flashAttention: true,
  });
  const f16 = await estimateLoad(llama, spec("f16"));
  const q8 = await estimateLoad(llama, spec("q8_0"));
  const q4 = await estimateLoad(llama, spec("q4_0"));
  t.comment(`RAM estimates: f16 ${f16.ramBytes}, q8_0 ${q8.ramBytes}, q4_0 ${q4.ramBytes}`);
  t.ok(q8.ramBytes < f16.ramBytes, "q8_0 below f16");
  t.ok(q4.ramBytes < q8.ramBytes, "q4_0 below q8_0");
});
