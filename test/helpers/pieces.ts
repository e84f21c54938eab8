/**
 * Generated tokens as Ollama reads them (its tokenizer's Decode, tokenizer/sentencepiece.go): each
 * token's piece as the vocabulary spells it, "▁" read as a space, a byte token ("<0x0A>") as its
 * byte. An oracle apart from llama.cpp's detokenizer, which drops the first token's leading space on
 * SentencePiece vocabularies. SentencePiece vocabularies only (the tiny test model's).
 */
import { readGgufMetadata } from "../../src/gguf/gguf.js";

export async function ollamaDecoder(file: string): Promise<(tokens: readonly number[]) => string> {
  const { metadata } = await readGgufMetadata(file, { maxArrayItems: 1_000_000, maxDepth: 1 });
  if (metadata["tokenizer.ggml.model"] !== "llama") throw new Error(`${file}: not a SentencePiece vocabulary`);
  const pieces = metadata["tokenizer.ggml.tokens"] as string[];
  return (tokens) => {
    const bytes: number[] = [];
    for (const token of tokens) {
      const piece = pieces[token]!;
      const byte = /^<0x([0-9A-Fa-f]{2})>$/.exec(piece);
      if (byte) bytes.push(parseInt(byte[1]!, 16));
      else bytes.push(...Buffer.from(piece.replaceAll("\u2581", " "), "utf8"));
    }
    return Buffer.from(bytes).toString("utf8");
  };
}

/** True when the model's vocabulary is SentencePiece's (`tokenizer.ggml.model` "llama"). */
export async function sentencePiece(file: string): Promise<boolean> {
  return (await readGgufMetadata(file, { maxDepth: 1 })).metadata["tokenizer.ggml.model"] === "llama";
}
