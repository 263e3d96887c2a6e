/**
 * Finding users by a scan (API.md "Finding users"): the one evaluation of a
 * query that no index serves, shared by every store, so that each answers
 * exactly as `matches` and `compareSortEntries` define. A store gives its
 * users in ascending id order, a step at a time (`ScanSource`); the scan
 * never examines more than one step between two turns of the event loop,
 * and on PostgreSQL a step is one statement, so no find holds the event
 * loop or a connection for long.
 *
 * - A filter with neither sort nor count is a bounded scan: from the
 *   cursor, at most `budget` users are examined per request. The page ends
 *   at `limit` matches, at the last user, or where the budget ran out; in
 *   the last case it may be short, even empty, and `next` is the place of
 *   the last user examined, so the next page goes on from there.
 * - A sort or a count is a full evaluation: every user is examined, a step
 *   at a time, keeping only the `limit + 1` first matches after the cursor
 *   in the sort's order. At most FULL_SCANS_AT_ONCE of them run at once
 *   per store; the others wait for their turn.
 * - A count with neither filter nor sort is the store's count of users.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { matches } from '../users/filter-match.js';
import type { StoredUser } from '../users/rules.js';
import { compareSortEntries, sortValuesOf, type SortEntry, type SortKey } from '../users/sort.js';
import type { FoundPage, MaybePromise, UserQuery } from './store.js';

/** The users a filter with no sort and no count examines in one request: the bound of a short page. */
const FIND_BUDGET = 10_000;
/**
 * The users examined in one step: one turn of the event loop, one
 * statement on PostgreSQL. Parsing and matching a user takes a few
 * microseconds, so a step holds the event loop for a few milliseconds.
 */
const FIND_STEP = 1_000;
/** Full evaluations (a sort or a count) under way at once per store; each holds at most one connection at a time. */
const FULL_SCANS_AT_ONCE = 2;

/** What a scan reads of a user. */
export type ScannedUser = Pick<StoredUser, 'id' | 'alias' | 'json'>;

/** A store's users as a scan reads them. */
interface ScanSource {
  /** Up to `limit` users with ids above `after`, in ascending id order. */
  usersAfter(after: number, limit: number): MaybePromise<readonly ScannedUser[]>;
  /** How many users the store holds. */
  userCount(): MaybePromise<number>;
}

/** No path is declared case-insensitive yet: declared fields (API.md "Declared fields") bring them. */
const NO_FOLDED_PATHS: ReadonlySet<string> = new Set();

interface Found {
  readonly entry: SortEntry;
  readonly user: ScannedUser;
}

/** The scans of one store: its source, its budget per request, and its turns of full evaluations. */
export class UserScans {
  private readonly step: number;
  private fullScans = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly source: ScanSource,
    /** Users a bounded scan examines per request (FIND_BUDGET); tests set it small. */
    private readonly budget = FIND_BUDGET,
  ) {
    this.step = Math.max(1, Math.min(FIND_STEP, budget));
  }

  /** The page `query` finds; `folded` holds the paths declared case-insensitive. */
  async find(query: UserQuery, folded: ReadonlySet<string> = NO_FOLDED_PATHS): Promise<FoundPage> {
    if (query.filter === undefined && query.sort.length === 0) return this.listById(query);
    if (query.sort.length === 0 && !query.count) return this.boundedScan(query, folded);
    await this.turn();
    try {
      return await this.fullScan(query, folded);
    } finally {
      this.endTurn();
    }
  }

  /** Neither filter nor sort (`count=true` alone): the listing by id, and with `count` the number of users. */
  private async listById(query: UserQuery): Promise<FoundPage> {
    const users = await this.source.usersAfter(query.after?.id ?? 0, query.limit + 1);
    const page = users.slice(0, query.limit).map((user) => ({ user, entry: { id: user.id, values: [] } }));
    return pageOf(page, users.length > query.limit, query.count ? await this.source.userCount() : undefined);
  }

  /** A filter in id order: at most `budget` users examined, from the cursor on. */
  private async boundedScan(query: UserQuery, folded: ReadonlySet<string>): Promise<FoundPage> {
    const { filter, limit } = query;
    const found: Found[] = [];
    let position = query.after?.id ?? 0;
    let examined = 0;
    while (examined < this.budget) {
      const wanted = Math.min(this.step, this.budget - examined);
      const users = await this.nextStep(position, wanted, examined === 0, query.signal);
      for (const user of users) {
        examined++;
        position = user.id;
        if (!matches(filter!, JSON.parse(user.json), folded)) continue;
        // A match past the page: the page is full, and more follow it.
        if (found.length === limit) return pageOf(found, true);
        found.push({ user, entry: { id: user.id, values: [] } });
      }
      if (users.length < wanted) return pageOf(found, false);
    }
    const page = pageOf(found, false);
    // The budget ran out: the next page goes on after the last user examined.
    return { ...page, next: { id: position, values: [] } };
  }

  /** A sort or a count: every user examined, the first `limit + 1` matches after the cursor kept in order. */
  private async fullScan(query: UserQuery, folded: ReadonlySet<string>): Promise<FoundPage> {
    const { filter, sort, after, limit } = query;
    const best: Found[] = [];
    let total = 0;
    let position = 0;
    for (let first = true; ; first = false) {
      const users = await this.nextStep(position, this.step, first, query.signal);
      for (const user of users) {
        position = user.id;
        const value: unknown = JSON.parse(user.json);
        if (filter !== undefined && !matches(filter, value, folded)) continue;
        total++;
        const entry = { id: user.id, values: sortValuesOf(value, sort, folded) };
        if (after === undefined || compareSortEntries(entry, after, sort) > 0)
          keepFirst(best, { entry, user }, limit + 1, sort);
      }
      if (users.length < this.step) break;
    }
    return pageOf(best.slice(0, limit), best.length > limit, query.count ? total : undefined);
  }

  /**
   * The users of a step after `after`. Every step but a scan's first waits
   * for a turn of the event loop, so that other requests run between two
   * steps of a store that answers at once (memory, journal); the scan stops
   * there once its client is gone.
   */
  private async nextStep(
    after: number,
    limit: number,
    first: boolean,
    signal: AbortSignal | undefined,
  ): Promise<readonly ScannedUser[]> {
    if (!first) await nextTurn();
    signal?.throwIfAborted();
    return this.source.usersAfter(after, limit);
  }

  /** Takes one of the FULL_SCANS_AT_ONCE turns, waiting for one to end when all are taken. */
  private async turn(): Promise<void> {
    if (this.fullScans < FULL_SCANS_AT_ONCE) {
      this.fullScans++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  /** Hands the turn to the scan that waited longest, if any, so that no scan starting meanwhile takes it first. */
  private endTurn(): void {
    const next = this.waiting.shift();
    if (next === undefined) this.fullScans--;
    else next();
  }
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
function pageOf(found: readonly Found[], more: boolean, total?: number): FoundPage {
  const aliases: [number, string][] = [];
  for (const { user } of found) if (user.alias !== undefined) aliases.push([user.id, user.alias]);
  return {
    items: found.map((f) => f.user.json),
    aliases,
    next: more && found.length > 0 ? found.at(-1)!.entry : undefined,
    ...(total !== undefined && { total }),
  };
}
