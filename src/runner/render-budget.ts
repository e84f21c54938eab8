/**
 * The render budget. A model without a Go template has its prompts rendered by
 * the GGUF's own Jinja chat template inside its runner, synchronously: a template that loops on
 * some chats (it can count the messages, see their roles and the tools) pins the runner's only
 * thread, and nothing inside it can interrupt the loop. So the parent times each render, from the
 * child's `render-start` (not from sending the job: a job may wait in the child behind other work)
 * until it reports the prompt ready (or the job settles); a render over the budget fails its
 * request and retires the runner (runner/client.ts).
 */
export class RenderBudget {
  private readonly timers = new Map<number, NodeJS.Timeout>();

  /** @param budgetMs SERVICE_RENDER_TIMEOUT; undefined = no budget. */
  constructor(
    readonly budgetMs: number | undefined,
    private readonly onOverrun: (id: number) => void,
  ) {}

  /** Starts timing job `id`'s render (again, for a job that renders more than once). */
  start(id: number): void {
    if (this.budgetMs === undefined) return;
    clearTimeout(this.timers.get(id));
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
