/**
 * Per-key rate limit: a token bucket per key id, `perMinute` tokens refilled evenly over a minute,
 * holding at most `perMinute` (so a key may burst up to a minute's worth, then goes at the rate).
 */

interface Bucket {
  tokens: number;
  updated: number;
}

/** The outcome of {@link RateLimiter.take}: allowed, or refused with the seconds to wait. */
export type RateDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

/** Token buckets keyed by key id. */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly perMs: number;

  /** `perMinute` 0 disables the limit. `now` is injectable for unit tests. */
  constructor(private readonly perMinute: number, private readonly now: () => number = () => performance.now()) {
    this.perMs = perMinute / 60_000;
  }

  /** Takes one token for `id` if there is one. */
  take(id: string): RateDecision {
    if (this.perMinute === 0) return { allowed: true };
    const now = this.now();
    const bucket = this.buckets.get(id) ?? { tokens: this.perMinute, updated: now };
    bucket.tokens = Math.min(this.perMinute, bucket.tokens + (now - bucket.updated) * this.perMs);
    bucket.updated = now;
    this.buckets.set(id, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { allowed: true };
    }
    return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / this.perMs / 1000)) };
  }

  /** Forgets buckets that are full again (they behave exactly like new ones); bounds memory. */
  sweep(): void {
    const now = this.now();
    for (const [id, b] of this.buckets) {
      if (b.tokens + (now - b.updated) * this.perMs >= this.perMinute) this.buckets.delete(id);
    }
  }
}
