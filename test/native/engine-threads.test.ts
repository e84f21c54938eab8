/**
 * The runner's Llama (src/runner/engine.ts): a context decodes with the threads it was given, even
 * while another context of the same runner is in use. With a draft model, the target's
 * verification batches come right after the draft's decodes; node-llama-cpp's thread budget
 * (`maxThreads`) would give the target 1 of its 2 threads then.
 */
import t from "tap";
import { LlamaCompletion } from "node-llama-cpp";
import { openLlama } from "../../src/runner/engine.js";
import { beginSpeculation, slotPredictors } from "../../src/runner/speculative.js";
import { testGguf } from "../helpers/models.js";

const shape = { preset: "tiny", layers: 2, seed: 7 } as const;

t.test("with a draft model, every target decode uses the load's threads", async (t) => {
  const llama = await openLlama(false, () => undefined);
  t.teardown(() => llama.dispose());
  const target = await llama.loadModel({ modelPath: await testGguf({ ...shape, identityLayers: 4 }) });
  const draftModel = await llama.loadModel({ modelPath: await testGguf(shape) });
  const context = await target.createContext({ contextSize: 512, sequences: 1, threads: 2 });
  const draft = { model: draftModel, context: await draftModel.createContext({ contextSize: 512, sequences: 1, threads: 2 }) };
  const [predictor] = slotPredictors({ draftPath: "draft", lookup: false, minConfidence: 0 }, 1, draft);
  const sequence = context.getSequence({ tokenPredictor: predictor! });
  const stats = beginSpeculation(sequence, predictor, undefined);

  // The threads the target's native context was set to for the decode that produced each token.
  const threads: number[] = [];
  const completion = new LlamaCompletion({ contextSequence: sequence });
  await completion.generateCompletion("the quick brown fox jumps over the lazy dog", {
    temperature: 0,
    maxTokens: 32,
    onToken: () => threads.push(context.currentThreads),
  });
  const drafted = stats();
  t.ok(drafted && drafted.accepted > 10, `the draft proposed and the target accepted (${drafted?.accepted}/${drafted?.proposed})`);
  t.ok(threads.length > 0, "tokens were generated");
  t.same([...new Set(threads)], [2], `every decode had 2 threads (per token: ${threads.join(",")})`);
});
