import { limitKey } from './rate-limit.js';
import { BUSY_RETRY_SECONDS, secondsUntil } from './login-load.js';
import type { LoginTryCounts, SharedSettings, TryCount } from '../store/store.js';

/**
 * The limit on failed logins (API.md "Access control and limits"), always
 * on: at most `limit` failures a minute per (client address, account name),
 * and at most `addressLimit` per client address over all names, so that
 * names made up by the thousand spend the address's own budget instead of
 * pushing its count for a real account out of the table. The right
 * password is refused too while either is spent (429), so the limit cannot
 * be used to test passwords.
 *
 * A try takes a slot before its password is checked, so a burst of
 * concurrent guesses cannot run more checks than the limit leaves; the
 * slot becomes a failure only if the password is wrong. A try that finds
 * the limit filled by tries still being checked, not by failures, is told
 * the server is busy (503), never that it failed too often. A success
 * forgets the failures of its address and account, so a user who types
 * the password right after a few typos starts over; a try the server was
 * too busy to check counts for nothing.
 */
interface LoginLimitOptions {
  /** Failures allowed per address and account, and window. */
  limit?: number;
  /** Failures allowed per address over all names, and window. */
  addressLimit?: number;
  windowMs?: number;
  /** Most (address, account) pairs held; at least `addressLimit`. */
  maxKeys?: number;
}

/** What the limit says of a try: go ahead with a slot, wait (429), or retry shortly (503). */
export type SlotAnswer = { slot: LoginSlot } | LoginRefusal;
export type LoginRefusal = { wait: number; scope: 'account' | 'address' } | { busy: number };

/** A try whose password is being checked. */
export interface LoginSlot {
  /** A wrong password: the try counts as a failure of its address and account. */
  failed(): void | Promise<void>;
  /** The right password: the failures of its address and account are forgotten. */
  succeeded(): void | Promise<void>;
  /** Not checked (the server was too busy): the try counts for nothing. */
  released(): void | Promise<void>;
}

/** The failed-login limit as the routes use it: one instance's LoginLimiter, or the one every instance shares. */
export interface LoginLimits {
  /** A slot for a try of `account` from `address` at `now` (milliseconds), or why it may not go ahead. */
  take(address: string, account: string, now: number): SlotAnswer | Promise<SlotAnswer>;
}

/** Longest account name kept in a key: longer names can never exist (64 characters), so they may share a key. */
const MAX_KEY_NAME = 65;

/** The key for a client address and the account name it tried. */
export function loginLimitKey(address: string, account: string): string {
  // Per /64 for IPv6, as the rate limit: one host holds a whole /64.
  return `${limitKey(address)}\n${account.slice(0, MAX_KEY_NAME)}`;
}

interface Rules {
  readonly limit: number;
  readonly addressLimit: number;
  readonly windowMs: number;
}

function rulesOf(options: LoginLimitOptions): Rules {
  return {
    limit: options.limit ?? 10,
    addressLimit: options.addressLimit ?? 100,
    windowMs: options.windowMs ?? 60_000,
  };
}

/** The refusal the counts of a try's account and address call for, or undefined: it may go ahead. */
function judgeTry(counts: LoginTryCounts, now: number, rules: Rules): LoginRefusal | undefined {
  const { account, address } = counts;
  if (account.failures >= rules.limit)
    return { wait: secondsUntil(account.oldest + rules.windowMs, now), scope: 'account' };
  if (address.failures >= rules.addressLimit)
    return { wait: secondsUntil(address.oldest + rules.windowMs, now), scope: 'address' };
  if (account.failures + account.pending >= rules.limit || address.failures + address.pending >= rules.addressLimit)
    return { busy: BUSY_RETRY_SECONDS };
  return undefined;
}

/** One (address, account) pair: the times of its failures in the window, oldest first, and its tries being checked. */
interface PairCount {
  failures: number[];
  pending: number;
}

/**
 * The limit in this process's memory. Memory is bounded: at most `maxKeys`
 * pairs, grouped by address; past that, the addresses least recently tried
 * are dropped whole, never the one trying. An address holds at most
 * `addressLimit` pairs with failures or tries in the window, so names it
 * makes up cannot push its own pairs out, and its pairs are dropped only
 * when `maxKeys / addressLimit` other addresses have tried since.
 */
export class LoginLimiter implements LoginLimits {
  readonly rules: Rules;
  readonly maxKeys: number;
  /** Per address key, its pairs by account name; a Map keeps insertion order, a tried address is moved to the end. */
  private readonly addresses = new Map<string, Map<string, PairCount>>();
  private pairs = 0;

  constructor(options: LoginLimitOptions = {}) {
    this.rules = rulesOf(options);
    this.maxKeys = options.maxKeys ?? 10_000;
    if (this.maxKeys < this.rules.addressLimit)
      throw new RangeError('maxKeys must be at least addressLimit: one address may hold that many pairs');
  }

  take(address: string, account: string, now: number): SlotAnswer {
    const where = limitKey(address);
    const name = account.slice(0, MAX_KEY_NAME);
    const names = this.touch(where, now);
    const pair = names.get(name);
    const refusal = judgeTry(
      { account: countOf(pair === undefined ? [] : [pair]), address: countOf(names.values()) },
      now,
      this.rules,
    );
    if (refusal !== undefined) {
      if (names.size === 0) this.addresses.delete(where);
      return refusal;
    }
    this.pair(where, name).pending++;
    this.evictBeyond(where);
    return { slot: this.slotOf(where, name, now) };
  }

  /** Pairs held, for tests of the bound. */
  get size(): number {
    return this.pairs;
  }

  private slotOf(where: string, name: string, at: number): LoginSlot {
    return {
      failed: () => {
        // The pair may have been dropped while its password was checked: the failure is counted anew.
        const pair = this.pair(where, name);
        pair.pending = Math.max(0, pair.pending - 1);
        pair.failures.push(at);
        this.evictBeyond(where);
      },
      succeeded: () => this.settle(where, name, true),
      released: () => this.settle(where, name, false),
    };
  }

  /** A try that is not a failure: its slot is given back, and on a success the pair's failures go too. */
  private settle(where: string, name: string, forget: boolean): void {
    const names = this.addresses.get(where);
    const pair = names?.get(name);
    if (names === undefined || pair === undefined) return;
    pair.pending = Math.max(0, pair.pending - 1);
    if (forget) pair.failures = [];
    if (pair.pending === 0 && pair.failures.length === 0) this.drop(names, name);
    if (names.size === 0) this.addresses.delete(where);
  }

  /** The address's pairs, moved to the most recently tried end, without the failures a window old. */
  private touch(where: string, now: number): Map<string, PairCount> {
    const names = this.addresses.get(where) ?? new Map<string, PairCount>();
    this.addresses.delete(where);
    this.addresses.set(where, names);
    for (const [name, pair] of names) {
      while (pair.failures.length > 0 && pair.failures[0]! <= now - this.rules.windowMs) pair.failures.shift();
      if (pair.pending === 0 && pair.failures.length === 0) this.drop(names, name);
    }
    return names;
  }

  private pair(where: string, name: string): PairCount {
    let names = this.addresses.get(where);
    if (names === undefined) this.addresses.set(where, (names = new Map()));
    let pair = names.get(name);
    if (pair === undefined) {
      names.set(name, (pair = { failures: [], pending: 0 }));
      this.pairs++;
    }
    return pair;
  }

  private drop(names: Map<string, PairCount>, name: string): void {
    if (names.delete(name)) this.pairs--;
  }

  private evictBeyond(trying: string): void {
    for (const [where, names] of this.addresses) {
      if (this.pairs <= this.maxKeys || where === trying) break;
      this.addresses.delete(where);
      this.pairs -= names.size;
    }
  }
}

/** Failures, their oldest time and tries under way of some pairs. */
function countOf(pairs: Iterable<PairCount>): TryCount {
  let failures = 0;
  let pending = 0;
  let oldest = Infinity;
  for (const pair of pairs) {
    failures += pair.failures.length;
    pending += pair.pending;
    if (pair.failures.length > 0) oldest = Math.min(oldest, pair.failures[0]!);
  }
  return { failures, pending, oldest };
}

/**
 * The failed-login limit held in the shared store (PostgreSQL), so that a
 * client spreading guesses over N instances gets no more tries than
 * against one. Same rules as LoginLimiter; the table is not bounded by
 * count (the store drops rows an hour old), so nothing is evicted.
 */
export class SharedLoginLimits implements LoginLimits {
  private readonly rules: Rules;

  constructor(
    private readonly shared: Pick<SharedSettings, 'takeLoginSlot' | 'settleLoginSlot'>,
    options: LoginLimitOptions = {},
  ) {
    this.rules = rulesOf(options);
  }

  async take(address: string, account: string, now: number): Promise<SlotAnswer> {
    const key = loginLimitKey(address, account);
    const taken = await this.shared.takeLoginSlot(limitKey(address), key, now - this.rules.windowMs, now, (counts) =>
      judgeTry(counts, now, this.rules),
    );
    if ('refused' in taken) return taken.refused;
    const settle = (outcome: 'failed' | 'succeeded' | 'released') => () =>
      this.shared.settleLoginSlot(taken.slot, key, outcome);
    return { slot: { failed: settle('failed'), succeeded: settle('succeeded'), released: settle('released') } };
  }
}
