import { limitKey } from './rate-limit.js';
import type { SharedSettings } from '../store/store.js';

/**
 * The limit on failed logins (API.md "Access control and limits"): at most
 * `limit` attempts a minute per (client address, account name), always on.
 *
 * An attempt takes a slot before its password is checked and a success gives
 * every slot of its key back, so a burst of concurrent guesses cannot run
 * more than `limit` scrypt checks, and a user who types the password right
 * after a few typos starts over. A refused attempt takes no slot: the wait
 * it is told (Retry-After) is the wait it gets.
 *
 * Memory is bounded: at most `maxKeys` keys, the least recently attempted
 * one evicted first (a Map keeps insertion order; a touched key is moved to
 * the end). Filling the table to evict a victim's key takes `maxKeys` failed
 * logins, each paying for a scrypt check.
 */
export interface LoginLimitOptions {
  /** Attempts allowed per key and window. */
  limit?: number;
  windowMs?: number;
  maxKeys?: number;
}

/** Longest account name kept in a key: longer names can never exist (64 characters), so they may share a key. */
const MAX_KEY_NAME = 65;

/** The key for a client address and the account name it tried. */
export function loginLimitKey(address: string, account: string): string {
  // Per /64 for IPv6, as the rate limit: one host holds a whole /64.
  return `${limitKey(address)}\n${account.slice(0, MAX_KEY_NAME)}`;
}

export class LoginLimiter implements LoginLimits {
  readonly limit: number;
  readonly windowMs: number;
  readonly maxKeys: number;
  /** Per key, the times of its attempts in the window, oldest first. */
  private readonly attempts = new Map<string, number[]>();

  constructor(options: LoginLimitOptions = {}) {
    this.limit = options.limit ?? 10;
    this.windowMs = options.windowMs ?? 60_000;
    this.maxKeys = options.maxKeys ?? 10_000;
  }

  /**
   * Takes a slot for an attempt at `now` (milliseconds). Returns undefined when
   * the attempt may go ahead, else the whole seconds until a slot frees (at least 1).
   */
  attempt(key: string, now: number): number | undefined {
    const times = this.attempts.get(key) ?? [];
    while (times.length > 0 && times[0]! <= now - this.windowMs) times.shift();
    this.attempts.delete(key);
    this.attempts.set(key, times);
    if (times.length >= this.limit) return Math.max(1, Math.ceil((times[0]! + this.windowMs - now) / 1000));
    times.push(now);
    for (const oldest of this.attempts.keys()) {
      if (this.attempts.size <= this.maxKeys) break;
      this.attempts.delete(oldest);
    }
    return undefined;
  }

  /** A successful login: its key starts over. */
  succeeded(key: string): void {
    this.attempts.delete(key);
  }

  /** Keys held, for tests of the bound. */
  get size(): number {
    return this.attempts.size;
  }
}

/** The failed-login limit as the routes use it: one instance's LoginLimiter, or the one every instance shares. */
export interface LoginLimits {
  /** Takes a slot: undefined when the attempt may go ahead, else the whole seconds to wait. */
  attempt(key: string, now: number): number | undefined | Promise<number | undefined>;
  /** A successful login: its key starts over. */
  succeeded(key: string): void | Promise<void>;
}

/**
 * The failed-login limit held in the shared store (PostgreSQL), so that a
 * client spreading guesses over N instances gets no more tries than
 * against one. Same limit and window as LoginLimiter.
 */
export class SharedLoginLimits implements LoginLimits {
  constructor(
    private readonly shared: Pick<SharedSettings, 'takeLoginSlot' | 'releaseLoginSlots'>,
    private readonly limit = 10,
    private readonly windowMs = 60_000,
  ) {}

  attempt(key: string, now: number): Promise<number | undefined> {
    return this.shared.takeLoginSlot(key, now, this.limit, this.windowMs);
  }

  succeeded(key: string): Promise<void> {
    return this.shared.releaseLoginSlots(key);
  }
}
