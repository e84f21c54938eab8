/**
 * Progress of pull, push, create and blob uploads, drawn as Ollama draws it: status lines
 * (`pulling manifest`, `writing manifest`, `success`) and one bar per layer
 * (`pulling 8eeb52dfb3bb:  42% ▕████      ▏ 1.2 MB/2.9 MB`), drawn with cli-progress on a
 * terminal. On a pipe there are no bars: each layer gets one line when it completes.
 */
import cliProgress from "cli-progress";
import { humanSize } from "./common.js";
import type { ProgressLine } from "./wire.js";

interface Layer {
  bar?: cliProgress.SingleBar;
  total: number;
  reported: boolean;
}

export class ProgressView {
  private multi: cliProgress.MultiBar | undefined;
  private readonly layers = new Map<string, Layer>();
  private lastStatus = "";
  private readonly tty: boolean;

  constructor(private readonly stream: NodeJS.WriteStream = process.stderr) {
    this.tty = stream.isTTY === true;
  }

  /** Shows one progress line from the server. */
  update(line: ProgressLine): void {
    if (line.digest && line.total && line.total > 0) return this.layer(line);
    if (line.status === this.lastStatus) return;
    this.endBars();
    this.lastStatus = line.status;
    this.stream.write(`${line.status}\n`);
  }

  /** Stops the bars (leaving their last state on screen). */
  finish(): void {
    this.endBars();
  }

  private layer(line: ProgressLine): void {
    const digest = line.digest ?? "";
    // Statuses carry the digest in full or short (`pulling 8eeb52dfb3bb`); show it once, short.
    const verb = line.status.replace(/\s*(sha256[:-])?[0-9a-f]{12,64}\b/i, "").trim() || "pulling";
    const label = `${verb} ${digest.replace(/^sha256[:-]/, "").slice(0, 12)}`;
    const total = line.total ?? 0;
    const completed = Math.min(line.completed ?? 0, total);
    this.lastStatus = line.status;
    let layer = this.layers.get(digest);
    if (!layer) {
      layer = { total, reported: false };
      this.layers.set(digest, layer);
      if (this.tty) {
        this.multi ??= new cliProgress.MultiBar(
          {
            stream: this.stream,
            format: "{label}: {percentage}% ▕{bar}▏ {sizes}",
            barCompleteChar: "█",
            barIncompleteChar: " ",
            barsize: 25,
            hideCursor: true,
            autopadding: true,
            fps: 10,
          },
          cliProgress.Presets.legacy,
        );
        layer.bar = this.multi.create(total, completed, { label, sizes: sizes(completed, total) });
      }
    }
    layer.bar?.setTotal(total);
    layer.bar?.update(completed, { label, sizes: sizes(completed, total) });
    if (!this.tty && completed >= total && !layer.reported) {
      layer.reported = true;
      this.stream.write(`${label}: 100% ${humanSize(total)}\n`);
    }
  }

  private endBars(): void {
    this.multi?.stop();
    this.multi = undefined;
  }
}

function sizes(completed: number, total: number): string {
  return `${humanSize(completed)}/${humanSize(total)}`;
}
