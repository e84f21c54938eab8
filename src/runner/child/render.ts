/**
 * Render jobs in the runner child: what the model's own chat template (node-llama-cpp's chat
 * wrapper, Jinja included) makes of a conversation, as text, for `_debug_render_only`.
 */
import type { ChatModelFunctions, GbnfJsonSchema } from "node-llama-cpp";
import { answerPrompt, promptText } from "../thinking-form.js";
import type { RenderJob } from "../types.js";
import { clientSafe } from "./io.js";
import { chatWrapperOf, toHistory } from "./chat-history.js";
import { JobFailure, withJob, type Job, type JobHost } from "./job.js";

/** Answers one `render` job with `rendered` (or `failed` when the template rejects the turns); synchronous. */
export function runRender(host: JobHost, id: number, job: RenderJob): Promise<void> {
  return withJob(host, id, { what: "rendering" }, (j) => render(j, job));
}

function render(j: Job, job: RenderJob): void {
  const { model } = j.model;
  try {
    const functions: ChatModelFunctions | undefined = job.tools?.length
      ? Object.fromEntries(
          job.tools.map((t) => [
            t.name,
            { ...(t.description ? { description: t.description } : {}), ...(t.parameters ? { params: t.parameters as GbnfJsonSchema } : {}) },
          ]),
        )
      : undefined;
    j.send({ type: "render-start", id: j.id });
    const { text } = answerPrompt(model, chatWrapperOf(model), toHistory(job.turns), job.think, functions);
    j.send({ type: "rendered", id: j.id, text: promptText(text, model) });
  } catch (err) {
    throw new JobFailure("invalid", `the model's chat template cannot render these messages: ${clientSafe(err)}`);
  }
}
