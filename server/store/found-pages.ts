/**
 * What every way of finding users shares (API.md "Finding users"): the
 * bounds of the work one request does, the users found with their place in
 * the order, and the page made of them. The scan (scan-users.ts) and the
 * indexes (index-find.ts) both answer through these, so their pages agree.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { matches } from '../users/filter-match.js';
import { textNeedles } from '../users/filter-needles.js';
import type { StoredUser } from '../users/rules.js';
import { compareSortEntries, sortValuesOf, type SortEntry, type SortKey } from '../users/sort.js';
import type { FindSignal, FoundPage, MaybePromise, UserQuery } from './store.js';

/**
 * The users a filter with no sort and no count examines in one request: the
 * bound of a short page. Each request costs a round trip and a page's work
 * beside its steps, so fewer, longer requests scan faster; at about 2 µs a
 * user, a request takes some tens of milliseconds, in steps that let others in.
 */
export const FIND_BUDGET = 50_000;
/**
 * The users examined in one step: one turn of the event loop, one
 * statement on PostgreSQL. Parsing and matching a user takes a few
 * microseconds, so a step holds the event loop for a few milliseconds.
 */
export const FIND_STEP = 1_000;

/** What a find reads of a user. */
export type ScannedUser = Pick<StoredUser, 'id' | 'alias' | 'json'>;

/** A user found, with its place in the order of the listing. */
export interface Found {
  readonly entry: SortEntry;
  readonly user: ScannedUser;
}

/** Adds `found` to `best`, which stays in the sort's order and holds at most `max` entries. */
function keepFirst(best: Found[], found: Found, max: number, sort: readonly SortKey[]): void {
  if (best.length === max && compareSortEntries(found.entry, best[max - 1]!.entry, sort) > 0) return;
  let low = 0;
  let high = best.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (compareSortEntries(best[middle]!.entry, found.entry, sort) < 0) low = middle + 1;
    else high = middle;
  }
  best.splice(low, 0, found);
  if (best.length > max) best.pop();
}

/** A page of `found`; `more`: users follow the last of them. */
export function pageOf(found: readonly Found[], more: boolean, total?: number): FoundPage {
  const items: string[] = [];
  const aliases: [number, string][] = [];
  for (const { user } of found) {
    items.push(user.json);
    if (user.alias !== undefined) aliases.push([user.id, user.alias]);
  }
  const next = more && found.length > 0 ? found[found.length - 1]!.entry : undefined;
  return total === undefined ? { items, aliases, next } : { items, aliases, next, total };
}

/**
 * A full evaluation's matches: every user offered is examined, the first
 * `limit + 1` after the cursor are kept in the sort's order, and the
 * matches are counted for `count`.
 */
export class BestMatches {
  private readonly best: Found[] = [];
  private total = 0;
  private readonly mayMatch: (json: string) => boolean;

  constructor(
    private readonly query: UserQuery,
    private readonly folded: ReadonlySet<string>,
  ) {
    this.mayMatch = query.filter === undefined ? () => true : textNeedles(query.filter, folded);
  }

  offer(user: ScannedUser): void {
    const { filter, sort, after, limit } = this.query;
    if (!this.mayMatch(user.json)) return;
    const value: unknown = JSON.parse(user.json);
    if (filter !== undefined && !matches(filter, value, this.folded)) return;
    this.total++;
    const entry = { id: user.id, values: sortValuesOf(value, sort, this.folded) };
    if (after === undefined || compareSortEntries(entry, after, sort) > 0)
      keepFirst(this.best, { entry, user }, limit + 1, sort);
  }

  page(): FoundPage {
    const { limit, count } = this.query;
    return pageOf(this.best.slice(0, limit), this.best.length > limit, count ? this.total : undefined);
  }
}

/**
 * A step of a find: every step but the first waits for a turn of the event
 * loop, so that other requests run between two steps of a store that
 * answers at once (memory, journal); the find stops there once its client
 * is gone.
 */
export async function nextStep<T>(read: () => MaybePromise<T>, first: boolean, signal: FindSignal | undefined) {
  if (!first) await nextTurn();
  throwIfGone(signal);
  return read();
}

/** Stops a find whose client is gone, as an aborted fetch stops: with an AbortError. */
export function throwIfGone(signal: FindSignal | undefined): void {
  if (signal?.aborted === true) throw new DOMException('The client is gone.', 'AbortError');
}
