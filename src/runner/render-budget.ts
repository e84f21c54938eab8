/**
 * The render budget (issue 13 item 15). A model without a Go template has its prompts rendered by
 * the GGUF's own Jinja chat template inside its runner, synchronously: a template that loops on
 * some chats (it can count the messages, see their roles and the tools) pins the runner's only
 * thread, and nothing inside it can interrupt the loop. So the parent times each job that renders,
 * from sending it until the child reports its prompt ready (or the job settles); a job over the
 * budget means a stuck runner, which the parent kills (runner/client.ts).
 */
export class RenderBudget {
  private readonly timers = new Map<number, NodeJS.Timeout>();

  /** @param budgetMs SERVICE_RENDER_TIMEOUT; undefined = no budget. */
  constructor(
    readonly budgetMs: number | undefined,
    private readonly onOverrun: (id: number) => void,
  ) {}

  /** Starts timing job `id`'s render. */
  start(id: number): void {
    if (this.budgetMs === undefined) return;
    const timer = setTimeout(() => {
      this.timers.delete(id);
      this.onOverrun(id);
    }, this.budgetMs);
    this.timers.set(id, timer);
  }

  /** Job `id` rendered its prompt, or settled: stop timing it. */
  stop(id: number): void {
    clearTimeout(this.timers.get(id));
    this.timers.delete(id);
  }

  clear(): void {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }
}

/** `2000` → `2s`, `1500` → `1.5s`. */
export function seconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(3))}s`;
}
