/**
 * What a flood of logins may cost the server (docs/operations.md "Abusive
 * clients"). Password hashing runs on libuv's thread pool, the same four
 * threads the journal's writes and syncs wait on: unbounded, a flood of
 * logins with made-up names would keep every thread hashing and stall
 * every durable write. So:
 *
 * - HashingGate: at most `concurrency` hashes at once (default 2 of the 4
 *   threads), at most `queue` logins waiting for one, and at most
 *   `perClient` of those from one client address; past that a login is
 *   refused at once, unhashed. A login that carries a valid session of the
 *   account it logs in to (a signed-in user signing in again) waits past
 *   the queue's bound, one per account. Waiting logins go first in, first
 *   out, the signed-in ones first.
 * - FailureBudget: failed logins server-wide in a sliding minute; once
 *   spent, logins without such a session are refused unhashed until it
 *   refills. One client address spends at most a tenth of it, so one
 *   client cannot spend it for everyone. Beside the per-address limit
 *   (login-limit.ts): many addresses together get no more guesses than this.
 *
 * Client addresses are the limits' keys (rate-limit.ts `limitKey`: an IPv6 /64 is one).
 */

/** How long a refused login is told to wait, in seconds. */
export const BUSY_RETRY_SECONDS = 1;

/** Who waits for a hash: the client's address key and, when signed in as the account it logs in to, that account. */
interface GateClient {
  client: string;
  signedInAs?: string;
}

interface Waiter {
  start: () => void;
  client: string;
  signedInAs: string | undefined;
}

export class HashingGate {
  private running = 0;
  /** Logins waiting within the queue's bound, oldest first. */
  private readonly waiting: Waiter[] = [];
  /** Signed-in logins waiting past the bound, oldest first, served before `waiting`: one per account. */
  private readonly signedIn: Waiter[] = [];
  /** Places of `waiting` each client holds. */
  private readonly placesOf = new Map<string, number>();

  constructor(
    readonly concurrency: number,
    readonly queue: number,
    readonly perClient: number,
  ) {}

  /** Runs `work` when a slot is free; undefined, at once, when `who` may not wait for one. */
  run<T>(work: () => Promise<T>, who: GateClient): Promise<T> | undefined {
    if (this.running < this.concurrency) {
      this.running++;
      return this.exec(work);
    }
    const lane = this.laneFor(who);
    if (lane === undefined) return undefined;
    return new Promise<void>((start) =>
      this.enqueue(lane, { start, client: who.client, signedInAs: who.signedInAs }),
    ).then(() => this.exec(work));
  }

  private laneFor(who: GateClient): Waiter[] | undefined {
    if (who.signedInAs !== undefined && !this.signedIn.some((w) => w.signedInAs === who.signedInAs))
      return this.signedIn;
    if (this.waiting.length >= this.queue || (this.placesOf.get(who.client) ?? 0) >= this.perClient) return undefined;
    return this.waiting;
  }

  private enqueue(lane: Waiter[], waiter: Waiter): void {
    lane.push(waiter);
    if (lane === this.waiting) this.placesOf.set(waiter.client, (this.placesOf.get(waiter.client) ?? 0) + 1);
  }

  private async exec<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } finally {
      this.handOver();
    }
  }

  /** The finished run's slot passes straight to the next in line, so no later arrival can take it first. */
  private handOver(): void {
    const next = this.signedIn.shift() ?? this.nextWaiting();
    if (next === undefined) this.running--;
    else next.start();
  }

  private nextWaiting(): Waiter | undefined {
    const next = this.waiting.shift();
    if (next === undefined) return undefined;
    const places = this.placesOf.get(next.client)!;
    if (places === 1) this.placesOf.delete(next.client);
    else this.placesOf.set(next.client, places - 1);
    return next;
  }
}

/** The share of the budget one client may spend: a tenth, so it takes ten clients to spend it all. */
const CLIENT_SHARE = 10;
const WINDOW_MS = 60_000;

export class FailureBudget {
  /** Failures of the window, oldest first. */
  private readonly failures: { at: number; client: string }[] = [];
  /** Per client, the times of its failures in the window, oldest first. */
  private readonly byClient = new Map<string, number[]>();
  /** Failures one client may count in the window. */
  readonly share: number;

  /** `perMinute` 0: no budget. */
  constructor(readonly perMinute: number) {
    this.share = Math.max(1, Math.ceil(perMinute / CLIENT_SHARE));
  }

  /**
   * Seconds until a failure leaves the window when the budget, or `client`'s share of it, is spent; undefined while
   * neither is.
   */
  spent(client: string, now: number): number | undefined {
    if (this.perMinute === 0) return undefined;
    this.expire(now);
    const own = this.byClient.get(client);
    if (own !== undefined && own.length >= this.share) return secondsUntil(own[0]! + WINDOW_MS, now);
    if (this.failures.length >= this.perMinute) return secondsUntil(this.failures[0]!.at + WINDOW_MS, now);
    return undefined;
  }

  record(client: string, now: number): void {
    if (this.perMinute === 0) return;
    this.failures.push({ at: now, client });
    const own = this.byClient.get(client);
    if (own === undefined) this.byClient.set(client, [now]);
    else own.push(now);
  }

  /**
   * Drops the failures a minute old. The lists hold about `perMinute` entries: spent() refuses before more are
   * recorded.
   */
  private expire(now: number): void {
    while (this.failures.length > 0 && this.failures[0]!.at <= now - WINDOW_MS) {
      const { client } = this.failures.shift()!;
      const own = this.byClient.get(client)!;
      own.shift();
      if (own.length === 0) this.byClient.delete(client);
    }
  }
}

/** Whole seconds from `now` until `at`, at least 1. */
export function secondsUntil(at: number, now: number): number {
  return Math.max(1, Math.ceil((at - now) / 1000));
}
