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
 *
 * A store that keeps the indexes of declared fields gives them too
 * (`IndexSource`): a query an index serves is answered from it instead
 * (index-find.ts).
 */
import { foldedPaths, type FieldDeclaration } from '../users/declared-fields.js';
import { textMatcher } from '../users/filter-needles.js';
import { BestMatches, FIND_BUDGET, FIND_STEP, nextStep, pageOf, type Found, type ScannedUser } from './found-pages.js';
import { IndexedFinds, indexPlanOf, type IndexSource } from './index-find.js';
import type { FindSignal, FoundPage, MaybePromise, UserQuery } from './store.js';

/** Full evaluations (a sort or a count) under way at once per store; each holds at most one connection at a time. */
const FULL_SCANS_AT_ONCE = 2;

/** A store's users as a scan reads them. */
interface ScanSource {
  /** Up to `limit` users with ids above `after`, in ascending id order. */
  usersAfter(after: number, limit: number): MaybePromise<readonly ScannedUser[]>;
  /** How many users the store holds. */
  userCount(): MaybePromise<number>;
}

/** The scans of one store: its source, its budget per request, and its turns of full evaluations. */
export class UserScans {
  private readonly step: number;
  private fullScans = 0;
  private readonly waiting: (() => void)[] = [];

  private readonly indexed: IndexedFinds | undefined;

  constructor(
    private readonly source: ScanSource,
    /** Users a bounded scan examines per request (FIND_BUDGET); tests set it small. */
    private readonly budget = FIND_BUDGET,
    /** The indexes of the declared fields, on a store that keeps them. */
    indexes?: IndexSource,
  ) {
    this.step = Math.max(1, Math.min(FIND_STEP, budget));
    const bounds = { budget, step: this.step, inTurn: <T>(run: () => Promise<T>) => this.inTurn(run) };
    this.indexed = indexes && new IndexedFinds(indexes, bounds);
  }

  /**
   * The page `query` finds, with `fields` declared: from an index that
   * serves it, else by a scan. The query's `folded` paths (else the
   * declared ones) compare lowercased.
   */
  find(query: UserQuery, fields: readonly FieldDeclaration[] = []): MaybePromise<FoundPage> {
    const folded = query.folded ?? foldedPaths(fields);
    const plan = this.indexed && indexPlanOf(query, fields, folded);
    if (plan !== undefined) return this.indexed!.find(query, plan, folded);
    if (query.filter === undefined && query.sort.length === 0) return this.listById(query);
    if (query.sort.length === 0 && !query.count) return this.boundedScan(query, folded);
    return this.inTurn(() => this.fullScan(query, folded));
  }

  /** `run` in one of the FULL_SCANS_AT_ONCE turns of a full evaluation. */
  private async inTurn<T>(run: () => Promise<T>): Promise<T> {
    await this.turn();
    try {
      return await run();
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
    const { limit } = query;
    const matchesText = textMatcher(query.filter!, folded);
    const found: Found[] = [];
    let position = query.after?.id ?? 0;
    let examined = 0;
    while (examined < this.budget) {
      const wanted = Math.min(this.step, this.budget - examined);
      const users = await this.usersAfter(position, wanted, examined === 0, query.signal);
      for (const user of users) {
        examined++;
        position = user.id;
        if (!matchesText(user.json)) continue;
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
    const matched = new BestMatches(query, folded);
    let position = 0;
    for (let first = true; ; first = false) {
      const users = await this.usersAfter(position, this.step, first, query.signal);
      for (const user of users) {
        position = user.id;
        matched.offer(user);
      }
      if (users.length < this.step) return matched.page();
    }
  }

  /** The users of a step after `after` (`nextStep`). */
  private usersAfter(
    after: number,
    limit: number,
    first: boolean,
    signal: FindSignal | undefined,
  ): Promise<readonly ScannedUser[]> {
    return nextStep(() => this.source.usersAfter(after, limit), first, signal);
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
