/**
 * Token lists between the runner and the daemon (both sides import it): packed as little-endian
 * 32-bit integers in base64, in parts of at most {@link PART_TOKENS} tokens. A JSON array of
 * millions of numbers cost the daemon a second or more of parsing in one go (every other request
 * waiting); base64 parts are parsed as strings and decoded natively, one part per message.
 */
import { endianness } from "node:os";
import type { FromRunner } from "./protocol.js";

/** Typed arrays are in the host's byte order: copied as they are on little-endian hosts. */
const LITTLE = endianness() === "LE";

/** Tokens per `tokens` message: 1 MiB of packed integers. */
export const PART_TOKENS = 256 * 1024;

/** The `tokens` messages for job `id`: every part but the last says `more`. */
export function* tokenMessages(id: number, tokens: ArrayLike<number>): Generator<FromRunner> {
  for (let start = 0; start === 0 || start < tokens.length; start += PART_TOKENS) {
    const end = Math.min(tokens.length, start + PART_TOKENS);
    const part = new Uint32Array(end - start);
    for (let i = start; i < end; i++) part[i - start] = tokens[i]!;
    const packed = Buffer.from(part.buffer);
    if (!LITTLE) packed.swap32();
    yield { type: "tokens", id, data: packed.toString("base64"), ...(end < tokens.length ? { more: true } : {}) };
  }
}

/** Gathers one job's `tokens` parts. */
export class TokenParts {
  private readonly parts: Buffer[] = [];

  /** Adds a part; returns the whole list once the last part came, else undefined. */
  add(data: string, more: boolean | undefined): Uint32Array | undefined {
    this.parts.push(Buffer.from(data, "base64"));
    if (more) return undefined;
    const all = Buffer.concat(this.parts);
    if (!LITTLE) all.swap32();
    const tokens = new Uint32Array(all.length / 4);
    new Uint8Array(tokens.buffer).set(all);
    return tokens;
  }
}
