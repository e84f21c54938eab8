/**
 * The byte level of the GGUF reader (gguf.ts): a forward-only buffered window over a file that never
 * reads past its end, with the checks every count and string length needs before anything is
 * allocated or looped over.
 */
import type fs from "node:fs/promises";
import { FIXED_VALUE_SIZE, GgufValueType as T } from "./types.js";

/** A metadata value. Long arrays are not kept (`maxArrayItems` of the limits). */
export type GgufValue = number | bigint | boolean | string | GgufValue[] | null;

/** The file is not GGUF, or breaks a bound. The message is safe to show to a client (no path). */
export class GgufError extends Error {
  override readonly name = "GgufError";
}

/** The longest string accepted, in bytes. */
export interface StringLimit {
  maxStringBytes: number;
}

const WINDOW = 1 << 20;

/** u64/i64 as a number when exact, else a bigint. */
export function small(v: bigint): number | bigint {
  return v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(v) : v;
}

/** A forward-only buffered reader over a file handle that never reads past the file's end. */
export class Reader {
  private buf = Buffer.alloc(0);
  private bufStart = 0; // file offset of buf[0]
  private pos = 0; // file offset of the next byte

  constructor(private readonly fh: fs.FileHandle, readonly size: number) {}

  get remaining(): number {
    return this.size - this.pos;
  }

  get position(): number {
    return this.pos;
  }

  /** Makes `n` bytes at `pos` available in `buf`; returns their offset in `buf`. */
  private async need(n: number): Promise<number> {
    if (n > this.remaining) throw new GgufError("truncated GGUF file");
    const end = this.pos + n;
    if (this.pos >= this.bufStart && end <= this.bufStart + this.buf.length) return this.pos - this.bufStart;
    const length = Math.min(Math.max(n, WINDOW), this.size - this.pos);
    const buf = Buffer.allocUnsafe(length);
    let got = 0;
    while (got < length) {
      const { bytesRead } = await this.fh.read(buf, got, length - got, this.pos + got);
      if (bytesRead === 0) throw new GgufError("truncated GGUF file");
      got += bytesRead;
    }
    this.buf = buf;
    this.bufStart = this.pos;
    return 0;
  }

  async num(n: number, read: (b: Buffer, o: number) => number): Promise<number> {
    const o = await this.need(n);
    this.pos += n;
    return read(this.buf, o);
  }

  u32(): Promise<number> {
    return this.num(4, (b, o) => b.readUInt32LE(o));
  }

  async big(signed: boolean): Promise<bigint> {
    const o = await this.need(8);
    this.pos += 8;
    return signed ? this.buf.readBigInt64LE(o) : this.buf.readBigUInt64LE(o);
  }

  /** A u64 count of items of at least `minItemBytes` each, refused when the file cannot hold them. */
  async count(minItemBytes: number, what: string): Promise<number> {
    const v = await this.big(false);
    if (v * BigInt(minItemBytes) > BigInt(this.remaining)) throw new GgufError(`${what} ${v} exceeds the file size`);
    return Number(v);
  }

  async string(lim: StringLimit, what = "string"): Promise<string> {
    const n = await this.count(1, `${what} length`);
    if (n > lim.maxStringBytes) throw new GgufError(`${what} of ${n} bytes exceeds the limit of ${lim.maxStringBytes}`);
    const o = await this.need(n);
    this.pos += n;
    return this.buf.toString("utf8", o, o + n);
  }

  /** Whether the `n` bytes at the current position are in the buffer. */
  private buffered(n: number): boolean {
    return this.pos >= this.bufStart && this.pos + n <= this.bufStart + this.buf.length;
  }

  /**
   * A string or fixed-size value read synchronously when all its bytes are already buffered, else
   * `undefined` with nothing consumed (read it with the async methods). The checks are
   * {@link string}'s and {@link count}'s.
   */
  bufferedValue(type: number, lim: StringLimit): GgufValue | undefined {
    if (type === T.STRING) {
      if (!this.buffered(8)) return undefined;
      const o = this.pos - this.bufStart;
      const v = this.buf.readBigUInt64LE(o);
      if (v > BigInt(this.remaining - 8)) throw new GgufError(`string length ${v} exceeds the file size`);
      const n = Number(v);
      if (n > lim.maxStringBytes) throw new GgufError(`string of ${n} bytes exceeds the limit of ${lim.maxStringBytes}`);
      if (!this.buffered(8 + n)) return undefined;
      this.pos += 8 + n;
      return this.buf.toString("utf8", o + 8, o + 8 + n);
    }
    const size = FIXED_VALUE_SIZE[type as T];
    if (size === undefined || !this.buffered(size)) return undefined;
    const b = this.buf;
    const o = this.pos - this.bufStart;
    let v: GgufValue;
    switch (type as T) {
      case T.U8: v = b.readUInt8(o); break;
      case T.I8: v = b.readInt8(o); break;
      case T.U16: v = b.readUInt16LE(o); break;
      case T.I16: v = b.readInt16LE(o); break;
      case T.U32: v = b.readUInt32LE(o); break;
      case T.I32: v = b.readInt32LE(o); break;
      case T.F32: v = b.readFloatLE(o); break;
      case T.BOOL: v = b.readUInt8(o) !== 0; break;
      case T.U64: v = small(b.readBigUInt64LE(o)); break;
      case T.I64: v = small(b.readBigInt64LE(o)); break;
      case T.F64: v = b.readDoubleLE(o); break;
      default: return undefined;
    }
    this.pos += size;
    return v;
  }

  async skip(n: number): Promise<void> {
    if (n > this.remaining) throw new GgufError("truncated GGUF file");
    this.pos += n;
  }
}
