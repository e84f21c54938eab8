/**
 * The output of one `/v1/responses` answer, built from the chat service's callbacks. The same
 * builder serves both forms: streaming, it emits OpenAI's events as the output grows
 * (`response.created`, `response.in_progress`, `response.output_item.added`,
 * `response.content_part.added`, `response.output_text.delta` … `.done`,
 * `response.function_call_arguments.delta`/`.done`, `response.output_item.done`, then
 * `response.completed` or `response.incomplete`); otherwise it only assembles the final object.
 * Thoughts of a thinking model are a `reasoning` item before the message.
 */
import { randomBytes } from "node:crypto";
import type { ToolCallSpec } from "../../chat/types.js";

type Json = Record<string, unknown>;
export type ResponseEvent = { type: string; sequence_number: number } & Json;

interface OpenPart {
  kind: "message" | "reasoning";
  index: number;
  item: Json & { id: string };
  text: string;
  logprobs: Json[];
}

export class ResponseOutput {
  readonly id = `resp_${hex()}`;
  private seq = 0;
  private started = false;
  private readonly output: Json[] = [];
  private open: OpenPart | undefined;

  /** @param base the fields echoed from the request (model, instructions, tools, sampling). */
  constructor(
    private readonly base: Json,
    private readonly emit?: (event: ResponseEvent) => void,
  ) {}

  /** @param logprobs of the delta's tokens, in the wire shape, when the request included them. */
  text(delta: string, logprobs: Json[] = []): void {
    if (delta || logprobs.length > 0) this.delta("message", delta, logprobs);
  }

  reasoning(delta: string): void {
    if (delta) this.delta("reasoning", delta);
  }

  /** Tool calls as `function_call` items, then the final response (also emitted when streaming). */
  finish(calls: readonly ToolCallSpec[], incomplete: boolean, usage: Json): Json {
    this.start();
    // The message the limit cut short is `incomplete`, as the response is (OpenAI's shape).
    const ended = incomplete ? "incomplete" : "completed";
    this.close(ended);
    // Like /v1/chat/completions: a call without text is not accompanied by an empty message.
    if (calls.length === 0 && !this.output.some((o) => o.type === "message")) {
      this.openPart("message");
      this.close(ended);
    }
    for (const call of calls) {
      const args = JSON.stringify(call.arguments);
      const item = { id: `fc_${hex()}`, type: "function_call", status: "in_progress", call_id: `call_${hex()}`, name: call.name, arguments: "" };
      const output_index = this.output.length;
      this.event("response.output_item.added", { output_index, item });
      this.event("response.function_call_arguments.delta", { item_id: item.id, output_index, delta: args });
      this.event("response.function_call_arguments.done", { item_id: item.id, output_index, name: call.name, arguments: args });
      const done = { ...item, status: "completed", arguments: args };
      this.output.push(done);
      this.event("response.output_item.done", { output_index, item: done });
    }
    const status = incomplete ? "incomplete" : "completed";
    const response = {
      ...this.snapshot(status),
      incomplete_details: incomplete ? { reason: "max_output_tokens" } : null,
      completed_at: incomplete ? null : unixNow(),
      usage,
    };
    this.event(`response.${status}`, { response });
    return response;
  }

  private delta(kind: OpenPart["kind"], delta: string, logprobs: Json[] = []): void {
    this.start();
    if (this.open?.kind !== kind) {
      this.close();
      this.openPart(kind);
    }
    const open = this.open!;
    open.text += delta;
    open.logprobs.push(...logprobs);
    const at = { item_id: open.item.id, output_index: open.index, content_index: 0 };
    if (kind === "message") this.event("response.output_text.delta", { ...at, delta, logprobs });
    else this.event("response.reasoning_text.delta", { ...at, delta });
  }

  private openPart(kind: OpenPart["kind"]): void {
    const item =
      kind === "message"
        ? { id: `msg_${hex()}`, type: "message", status: "in_progress", role: "assistant", content: [] }
        : { id: `rs_${hex()}`, type: "reasoning", summary: [], content: [] };
    this.open = { kind, index: this.output.length, item, text: "", logprobs: [] };
    this.output.push(item);
    this.event("response.output_item.added", { output_index: this.open.index, item });
    this.event("response.content_part.added", { item_id: item.id, output_index: this.open.index, content_index: 0, part: this.part(kind, "") });
  }

  /** Ends the open item; a message item ends with `status` (a change of kind ends it `completed`). */
  private close(status: "completed" | "incomplete" = "completed"): void {
    const open = this.open;
    if (!open) return;
    this.open = undefined;
    const at = { item_id: open.item.id, output_index: open.index, content_index: 0 };
    const part = this.part(open.kind, open.text, open.logprobs);
    this.event(open.kind === "message" ? "response.output_text.done" : "response.reasoning_text.done", {
      ...at,
      text: open.text,
      ...(open.kind === "message" ? { logprobs: open.logprobs } : {}),
    });
    this.event("response.content_part.done", { ...at, part });
    const done = { ...open.item, ...(open.kind === "message" ? { status } : {}), content: [part] };
    this.output[open.index] = done;
    this.event("response.output_item.done", { output_index: open.index, item: done });
  }

  private part(kind: OpenPart["kind"], text: string, logprobs: Json[] = []): Json {
    return kind === "message" ? { type: "output_text", text, annotations: [], logprobs } : { type: "reasoning_text", text };
  }

  /** `response.created` and `response.in_progress` go out with the first output, after the model is loaded. */
  private start(): void {
    if (this.started) return;
    this.started = true;
    this.event("response.created", { response: this.snapshot("in_progress") });
    this.event("response.in_progress", { response: this.snapshot("in_progress") });
  }

  private snapshot(status: string): Json {
    return {
      id: this.id,
      object: "response",
      created_at: this.createdAt,
      status,
      error: null,
      incomplete_details: null,
      output: structuredClone(this.output),
      usage: null,
      ...this.base,
    };
  }

  private readonly createdAt = unixNow();

  private event(type: string, data: Json): void {
    this.emit?.({ type, sequence_number: this.seq++, ...data });
  }
}

function hex(): string {
  return randomBytes(12).toString("hex");
}

function unixNow(): number {
  return Math.floor(Date.now() / 1000);
}
