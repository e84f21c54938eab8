/**
 * The one definition of the context length a model runs with (scheduler/context-length.ts): the
 * request, then the policy file (its num_ctx, then its default options), then the model's
 * PARAMETER, then SERVICE_CONTEXT_LENGTH; capped at the model's trained context when it is known.
 */
import t from "tap";
import { contextLength, withinTrained } from "../../src/scheduler/context-length.js";

t.test("precedence: request, policy num_ctx, policy options, PARAMETER, default", async (t) => {
  const policy = { numCtx: 300, options: { num_ctx: 400 } };
  const params = { num_ctx: 500 };
  t.equal(contextLength({ request: 200, policy, params, fallback: 600 }), 200);
  t.equal(contextLength({ policy, params, fallback: 600 }), 300);
  t.equal(contextLength({ policy: { options: { num_ctx: 400 } }, params, fallback: 600 }), 400);
  t.equal(contextLength({ policy: { options: {} }, params, fallback: 600 }), 500);
  t.equal(contextLength({ params: {}, fallback: 600 }), 600);
  t.equal(contextLength({ request: "many", params: { num_ctx: "x" }, fallback: 600 }), 600, "values that are not numbers are not context lengths");
  // A pulled model's params are not checked as a create's are; below 1 the generation cap (a multiple of num_ctx) would be none.
  for (const bad of [-5, 0]) t.equal(contextLength({ params: { num_ctx: bad }, fallback: 600 }), 600, `a stored num_ctx of ${bad} is not one`);
});

t.test("capped at the trained context when it is known", async (t) => {
  t.equal(contextLength({ request: 8192, params: {}, fallback: 4096 }, 2048), 2048);
  t.equal(contextLength({ request: 1024, params: {}, fallback: 4096 }, 2048), 1024);
  t.equal(contextLength({ params: {}, fallback: 4096 }, 0), 4096, "0: unknown, no cap");
  t.equal(withinTrained(5000, undefined), 5000);
  t.equal(withinTrained(5000, 4096), 4096);
});
