/**
 * Anthropic's streaming event sequence, built from the chat service's callbacks:
 * `message_start`, then for each content block `content_block_start`, its deltas (`thinking_delta`,
 * `text_delta`, `input_json_delta`) and `content_block_stop`, then `message_delta` (stop reason,
 * usage) and `message_stop`. Thinking and text alternate as blocks of their own; tool calls, known
 * when generation ends, follow as `tool_use` blocks with their input as one JSON delta.
 */
import type { AnthropicOutputBlock, AnthropicResponse, AnthropicToolUseBlock } from "../../api/anthropic.js";

export type AnthropicEvent = { type: string } & Record<string, unknown>;

export class MessageEvents {
  private started = false;
  private open: "text" | "thinking" | undefined;
  private index = -1;

  /** @param emit receives each event in order (the route writes it as a named SSE event). */
  constructor(
    private readonly head: Pick<AnthropicResponse, "id" | "model">,
    private readonly emit: (event: AnthropicEvent) => void,
  ) {}

  text(delta: string): void {
    if (delta) this.delta("text", { type: "text_delta", text: delta });
  }

  thinking(delta: string): void {
    if (delta) this.delta("thinking", { type: "thinking_delta", thinking: delta });
  }

  /** Tool calls, the stop reason and the usage: closes the message. */
  finish(
    toolUses: readonly AnthropicToolUseBlock[],
    stopReason: AnthropicResponse["stop_reason"],
    stopSequence: string | null,
    usage: AnthropicResponse["usage"],
  ): void {
    this.start();
    this.close();
    for (const use of toolUses) {
      this.index++;
      this.emit({ type: "content_block_start", index: this.index, content_block: { ...use, input: {} } });
      this.emit({ type: "content_block_delta", index: this.index, delta: { type: "input_json_delta", partial_json: JSON.stringify(use.input) } });
      this.emit({ type: "content_block_stop", index: this.index });
    }
    this.emit({ type: "message_delta", delta: { stop_reason: stopReason, stop_sequence: stopSequence }, usage });
    this.emit({ type: "message_stop" });
  }

  private delta(kind: "text" | "thinking", delta: Record<string, unknown>): void {
    this.start();
    if (this.open !== kind) {
      this.close();
      this.index++;
      this.open = kind;
      const block: AnthropicOutputBlock = kind === "text" ? { type: "text", text: "" } : { type: "thinking", thinking: "", signature: "" };
      this.emit({ type: "content_block_start", index: this.index, content_block: block });
    }
    this.emit({ type: "content_block_delta", index: this.index, delta });
  }

  private close(): void {
    if (this.open === undefined) return;
    this.emit({ type: "content_block_stop", index: this.index });
    this.open = undefined;
  }

  /**
   * `message_start` goes out with the first event, after the model is loaded (a load failure stays
   * a real 500). The prompt's token count is known only at the end: it comes in `message_delta`.
   */
  private start(): void {
    if (this.started) return;
    this.started = true;
    const message: AnthropicResponse = {
      ...this.head,
      type: "message",
      role: "assistant",
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 0, output_tokens: 0 },
    };
    this.emit({ type: "message_start", message });
  }
}
