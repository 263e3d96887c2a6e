/**
 * What a flood of logins may cost the server (docs/operations.md "Abusive
 * clients"). Password hashing runs on libuv's thread pool, the same four
 * threads the journal's writes and syncs wait on: unbounded, a flood of
 * logins with made-up names would keep every thread hashing and stall
 * every durable write. So:
 *
 * - HashingGate: at most `concurrency` hashes at once (default 2 of the 4
 *   threads), at most `queue` logins waiting for one; past that a login is
 *   refused at once, unhashed. A login that carries a valid session (a
 *   signed-in user signing in again) waits without the queue's bound.
 * - FailureBudget: failed logins server-wide in a sliding minute; once
 *   spent, logins without a valid session are refused unhashed until it
 *   refills. Beside the per-address limit (login-limit.ts): many addresses
 *   together get no more guesses than this.
 */

/** How long a refused login is told to wait, in seconds. */
export const BUSY_RETRY_SECONDS = 1;

export class HashingGate {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    readonly concurrency: number,
    readonly queue: number,
  ) {}

  /** Runs `work` when a slot is free; undefined, at once, when the queue is full and `priority` is false. */
  run<T>(work: () => Promise<T>, priority = false): Promise<T> | undefined {
    if (this.running < this.concurrency) return this.start(work);
    if (!priority && this.waiting.length >= this.queue) return undefined;
    return new Promise<void>((resolve) => (priority ? this.waiting.unshift(resolve) : this.waiting.push(resolve))).then(() => this.start(work));
  }

  private async start<T>(work: () => Promise<T>): Promise<T> {
    this.running++;
    try {
      return await work();
    } finally {
      this.running--;
      const next = this.waiting.shift();
      if (next !== undefined) next();
    }
  }
}

export class FailureBudget {
  /** Failures per second of the last minute, by second (epoch seconds mod 60). */
  private readonly counts = new Array<number>(60).fill(0);
  private readonly seconds = new Array<number>(60).fill(-1);

  /** `perMinute` 0: no budget. */
  constructor(readonly perMinute: number) {}

  /** Seconds until a failure leaves the window when the budget is spent; undefined while it is not. */
  spent(now: number): number | undefined {
    if (this.perMinute === 0) return undefined;
    const second = Math.floor(now / 1000);
    let total = 0;
    let oldest = second;
    for (let i = 0; i < 60; i++) {
      if (this.seconds[i]! > second - 60) {
        total += this.counts[i]!;
        if (this.counts[i]! > 0) oldest = Math.min(oldest, this.seconds[i]!);
      }
    }
    return total >= this.perMinute ? Math.max(1, oldest + 60 - second) : undefined;
  }

  record(now: number): void {
    const second = Math.floor(now / 1000);
    const slot = second % 60;
    if (this.seconds[slot] !== second) {
      this.seconds[slot] = second;
      this.counts[slot] = 0;
    }
    this.counts[slot]!++;
  }
}
