/**
 * `maxTokens` (num_predict) is a hard limit, also when the last token allowed is only part of a
 * character (patches/node-llama-cpp+3.22.1.patch, its change to LlamaCompletion). node-llama-cpp
 * held such a token back to complete the character with the next one, skipping its maxTokens check,
 * so it generated one token more than asked (seen: num_predict 3 → eval_count 4, 2 in 60 requests
 * with random sampling). Now the token goes out as it is, like Ollama's runner sends a partial
 * character at the limit. Here every generated token is forced to be such a byte.
 */
import t from "tap";
import { LlamaCompletion, TokenBias, type Token } from "node-llama-cpp";
import { tinyContext } from "../helpers/batches.js";

t.test("maxTokens holds when the last token is part of a character", async (t) => {
  const { model, context } = await tinyContext(t, 256, 1);
  // A token that is the first byte of a multi-byte character: its text alone ends in U+FFFD.
  const partial = Array.from({ length: 512 }, (_, i) => i as Token).find((i) => !model.isSpecialToken(i) && model.detokenize([i]).endsWith("\uFFFD"));
  t.ok(partial !== undefined, `the vocabulary has a partial-character token (${partial})`);
  const sequence = context.getSequence();
  for (const maxTokens of [1, 2, 3, 5]) {
    let generated = 0;
    await sequence.clearHistory();
    const result = await new LlamaCompletion({ contextSequence: sequence }).generateCompletionWithMeta("Hi", {
      maxTokens,
      temperature: 0,
      tokenBias: TokenBias.for(model).set(partial!, { logit: 100 }),
      onToken: (tokens) => (generated += tokens.length),
    });
    t.equal(generated, maxTokens, `maxTokens ${maxTokens}: ${generated} tokens out`);
    t.equal(result.metadata.stopReason, "maxTokens");
  }
});
