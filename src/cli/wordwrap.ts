/**
 * Word wrapping of a streamed answer at the terminal's width (`/set wordwrap`, on by default in
 * `lmd run`, as in Ollama). Text is written as it arrives; when a word reaches the right margin
 * (the width less 5 columns, Ollama's margin) the cursor goes back over the part already written,
 * clears it and writes the word again on the next line. A word longer than a line is broken.
 */

/** Columns a code point takes in a terminal: 0 for marks and controls, 2 for wide East Asian forms and emoji. */
export function charWidth(ch: string): number {
  const cp = ch.codePointAt(0) ?? 0;
  if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || /^[\p{Mn}\p{Me}\u200b-\u200f]$/u.test(ch)) return 0;
  if (
    (cp >= 0x1100 && cp <= 0x115f) || // Hangul Jamo
    (cp >= 0x2e80 && cp <= 0xa4cf && cp !== 0x303f) || // CJK radicals … Yi
    (cp >= 0xac00 && cp <= 0xd7a3) || // Hangul syllables
    (cp >= 0xf900 && cp <= 0xfaff) || // CJK compatibility ideographs
    (cp >= 0xfe30 && cp <= 0xfe4f) || // CJK compatibility forms
    (cp >= 0xff00 && cp <= 0xff60) || // fullwidth forms
    (cp >= 0xffe0 && cp <= 0xffe6) ||
    (cp >= 0x1f300 && cp <= 0x1faff) || // emoji and pictographs
    (cp >= 0x20000 && cp <= 0x3fffd) // CJK extensions
  ) return 2;
  return 1;
}

/** The wrapping state of one answer: feed it the streamed pieces, write what it returns. */
export class WordWrap {
  private column = 0;
  /** The current word (already written on the current line) and its width. */
  private word = "";
  private wordWidth = 0;

  /** `width` is read for each piece, so a resized terminal is followed. */
  constructor(private readonly width: () => number) {}

  /** Starts over at the beginning of a line (after text written around the wrapper). */
  reset(): void {
    this.column = 0;
    this.word = "";
    this.wordWidth = 0;
  }

  /** What to write for `text`: the text itself, with line breaks (and cursor moves) added. */
  wrap(text: string): string {
    const width = this.width();
    if (width < 10) return text; // too narrow to wrap usefully (Ollama's rule)
    const limit = width - 5;
    let out = "";
    for (const ch of text) {
      if (ch === "\n" || ch === "\r") {
        out += ch;
        this.reset();
        continue;
      }
      const w = ch === "\t" ? 8 - (this.column % 8) : charWidth(ch);
      const space = ch === " " || ch === "\t";
      if (this.column + w > limit) {
        out += this.breakLine(ch, w, space);
        continue;
      }
      out += ch;
      this.column += w;
      if (space || w >= 2) this.endWord(); // a line may break after a space or a wide (CJK) character
      else this.addToWord(ch, w);
    }
    return out;
  }

  /** A character that does not fit on the line: the line ends before the word it belongs to. */
  private breakLine(ch: string, w: number, space: boolean): string {
    if (space) {
      // A space at the margin becomes the line break itself.
      this.reset();
      return "\n";
    }
    if (this.wordWidth > 0 && this.wordWidth + w <= this.width() - 5) {
      // Take the word back from the end of this line and start the next line with it.
      const back = `\x1b[${this.wordWidth}D\x1b[K`;
      const moved = `${back}\n${this.word}${ch}`;
      this.column = this.wordWidth + w;
      this.addToWord(ch, w);
      return moved;
    }
    // No word to move, or one longer than a line: break it here.
    this.reset();
    this.column = w;
    if (w < 2) this.addToWord(ch, w);
    return `\n${ch}`;
  }

  private addToWord(ch: string, w: number): void {
    this.word += ch;
    this.wordWidth += w;
  }

  private endWord(): void {
    this.word = "";
    this.wordWidth = 0;
  }
}
