/**
 * `POST /api/tokenize {model, content, add_special}` → `{tokens}` and `POST /api/detokenize
 * {model, tokens}` → `{content}`: llama-server's endpoints and field names, so that clients can
 * count tokens before they send. The model's own runner tokenizes, so the model is loaded (as
 * llama-server has it loaded). Special-token text in `content` is parsed as special tokens (llama-server's
 * `parse_special`, default true); `add_special` (default false, as llama-server) adds BOS/EOS where the
 * vocabulary asks for them.
 */
import { setImmediate } from "node:timers/promises";
import { detokenizeSchema, tokenizeSchema, type DetokenizeRequest, type TokenizeRequest } from "../api/tokenize-schemas.js";
import { readJson } from "../http/body.js";
import { sendJson } from "../http/respond.js";
import type { RequestContext, Router } from "../http/router.js";
import { compileValidator } from "../http/validate.js";
import { detokenize as detokenizeText, tokenize as tokenizeText } from "../chat/embed.js";
import { resolveTarget } from "../chat/target.js";
import { parseKeepAlive } from "./generate.js";
import type { Services } from "../chat/services.js";

const validateTokenize = compileValidator<TokenizeRequest>(tokenizeSchema);
const validateDetokenize = compileValidator<DetokenizeRequest>(detokenizeSchema);

export function tokenizeRoutes(router: Router, services: Services): void {
  router.add("POST", "/api/tokenize", (ctx) => tokenize(ctx, services));
  router.add("POST", "/api/detokenize", (ctx) => detokenize(ctx, services));
}

async function tokenize(ctx: RequestContext, services: Services): Promise<void> {
  const body = validateTokenize(await readJson(ctx.req, services.config.maxBodyBytes));
  const target = await resolveTarget(services, body.model, body.options, parseKeepAlive(body.keep_alive), ctx.log);
  const tokens = await tokenizeText(services, ctx.signal, target, body.content, body.add_special === true, body.parse_special !== false);
  if (tokens.length <= SLICE_TOKENS) return sendJson(ctx.res, 200, { tokens: Array.from(tokens) });
  await sendTokens(ctx, tokens);
}

/** Tokens written per turn of the event loop in a long answer. */
const SLICE_TOKENS = 64 * 1024;

/**
 * A long token list as `{"tokens":[…]}`, written a slice per turn of the event loop (and only as
 * fast as the client reads): the whole list as one JSON string, millions of numbers, would hold
 * every other request for as long as it takes to build.
 */
async function sendTokens(ctx: RequestContext, tokens: Uint32Array): Promise<void> {
  const { res } = ctx;
  res.writeHead(200, { "content-type": "application/json; charset=utf-8" });
  if (ctx.req.method === "HEAD") return void res.end();
  res.write('{"tokens":[');
  for (let start = 0; start < tokens.length && !ctx.signal.aborted; start += SLICE_TOKENS) {
    const slice = tokens.subarray(start, start + SLICE_TOKENS).join(",");
    const ready = res.write(start === 0 ? slice : `,${slice}`);
    await (ready ? setImmediate() : drained(ctx));
  }
  res.end("]}");
}

/** Resolves when the response can take more, or the client is gone. */
function drained(ctx: RequestContext): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      ctx.res.off("drain", done);
      ctx.signal.removeEventListener("abort", done);
      resolve();
    };
    ctx.res.once("drain", done);
    ctx.signal.addEventListener("abort", done, { once: true });
  });
}

async function detokenize(ctx: RequestContext, services: Services): Promise<void> {
  const body = validateDetokenize(await readJson(ctx.req, services.config.maxBodyBytes));
  const target = await resolveTarget(services, body.model, body.options, parseKeepAlive(body.keep_alive), ctx.log);
  const content = await detokenizeText(services, ctx.signal, target, body.tokens);
  sendJson(ctx.res, 200, { content });
}
