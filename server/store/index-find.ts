/**
 * Finding users from the indexes of declared fields (API.md "Declared
 * fields"), shared by every store that keeps them: a query whose filter
 * holds a condition an index serves, or whose sort starts with a declared
 * path, reads only the users the index names, where a scan would read them
 * all. The index only narrows what is read: `matches` and the sort's order
 * still decide, so the answer is the scan's (scan-users.ts).
 *
 * - A condition (`eq`, `sw`, `gt`, `ge`, `lt`, `le` on a declared path,
 *   alone or in the filter's top-level `and`) gives the candidates: the
 *   users that hold a key in its range. Without sort or count they are
 *   read in id order until the page is full; with either, all of them.
 * - A sort whose first key is declared walks that key's order in the
 *   index (every user has one entry there, the members that sort last
 *   included), a step at a time, until the page is full. With a filter a
 *   page examines at most `budget` users, like a bounded scan; with more
 *   keys, the users that tie on the first are read and ordered together.
 */
import type { FieldDeclaration } from '../users/declared-fields.js';
import { matches } from '../users/filter-match.js';
import { textMatcher } from '../users/filter-needles.js';
import type { CompareOp, Filter } from '../users/filter-parse.js';
import { keyRangeOf, keyValue, LAST_KEY, valueKey, type KeyRange } from '../users/index-key.js';
import { compareSortEntries, sortValuesOf, type SortEntry } from '../users/sort.js';
import { BestMatches, nextStep, pageOf, throwIfGone, type Found, type ScannedUser } from './found-pages.js';
import type { FindSignal, FoundPage, MaybePromise, UserQuery } from './store.js';

/** One entry of an index: a key and the user that holds it. */
export interface IndexEntry {
  readonly key: string;
  readonly id: number;
}

/**
 * The indexes of a store's declared fields, as a find reads them. A source
 * that answers at once (memory, journal) answers from its state as it is
 * then: entries and users read in one synchronous stretch agree, each
 * user holding its entry's key.
 */
export interface IndexSource {
  /** The users that hold a key of `field` in `range`, each at least once, in any order. */
  idsInRange(field: FieldDeclaration, range: KeyRange): MaybePromise<readonly number[]>;
  /**
   * Up to `limit` sort entries of `field` after `after` (from the first
   * without it), in the order of a sort on that key alone: present values
   * ascending, or descending, ties by ascending id, then the LAST_KEY
   * entries by ascending id.
   */
  sortedAfter(
    field: FieldDeclaration,
    descending: boolean,
    after: IndexEntry | undefined,
    limit: number,
  ): MaybePromise<readonly IndexEntry[]>;
  /** The users of `ids` that exist, in the order of `ids`. */
  usersOf(ids: readonly number[]): MaybePromise<readonly ScannedUser[]>;
  userCount(): MaybePromise<number>;
  /**
   * The users that hold `key` at a unique `field`, read with their entries
   * in one statement, ascending by id: for a source where each read is a
   * round trip (PostgreSQL), an `eq` in one.
   */
  holdersOfKey?(field: FieldDeclaration, key: string): Promise<readonly ScannedUser[]>;
}

/** How an index serves a query. */
type IndexPlan =
  | {
      readonly kind: 'condition';
      readonly field: FieldDeclaration;
      readonly range: KeyRange;
      /** Every user the range names matches the whole filter: it is that one `eq`, and a key is its value. */
      readonly exact: boolean;
    }
  | { readonly kind: 'sort'; readonly field: FieldDeclaration };

/** The bounds of the scan (scan-users.ts), which a find from an index keeps too. */
interface Bounds {
  readonly budget: number;
  readonly step: number;
  /** Runs a full evaluation in its turn. */
  inTurn<T>(run: () => Promise<T>): Promise<T>;
}

/** Which conditions serve best: an `eq` names fewest users, a range most. */
const OP_RANK: Partial<Record<CompareOp, number>> = { eq: 0, sw: 1, gt: 2, ge: 2, lt: 2, le: 2 };

/**
 * How an index serves `query`, or undefined when none does. An index
 * serves only a query that folds its path as the index does: a request
 * that saw other declarations than the store's now is answered by a scan.
 */
export function indexPlanOf(
  query: UserQuery,
  fields: readonly FieldDeclaration[],
  folded: ReadonlySet<string>,
): IndexPlan | undefined {
  const usable = (path: readonly string[]) => {
    // Most paths are one name: joining it would make a new string to compare.
    const dotted = path.length === 1 ? path[0]! : path.join('.');
    return fields.find((f) => f.path === dotted && f.caseInsensitive === folded.has(dotted));
  };
  const condition = servedCondition(query.filter, usable);
  if (condition !== undefined) return condition;
  const first = query.sort[0];
  // A count with a filter no index serves examines every user anyway.
  if (first === undefined || (query.count && query.filter !== undefined)) return undefined;
  const field = usable(first.path);
  return field && { kind: 'sort', field };
}

function servedCondition(
  filter: Filter | undefined,
  usable: (path: readonly string[]) => FieldDeclaration | undefined,
): IndexPlan | undefined {
  if (filter === undefined) return undefined;
  let best: { rank: number; plan: IndexPlan } | undefined;
  for (const term of filter.kind === 'and' ? filter.operands : [filter]) {
    if (term.kind !== 'compare') continue;
    const rank = OP_RANK[term.op];
    const field = usable(term.path);
    if (rank === undefined || field === undefined || (best !== undefined && best.rank <= rank)) continue;
    const range = keyRangeOf(term.op, term.value, field.caseInsensitive);
    const exact = term === filter && term.op === 'eq';
    if (range !== undefined) best = { rank, plan: { kind: 'condition', field, range, exact } };
  }
  return best?.plan;
}

/** Finds from a store's indexes. */
export class IndexedFinds {
  constructor(
    private readonly source: IndexSource,
    private readonly bounds: Bounds,
  ) {}

  find(query: UserQuery, plan: IndexPlan, folded: ReadonlySet<string>): MaybePromise<FoundPage> {
    if (plan.kind === 'condition') return this.byCondition(query, plan, folded);
    return query.sort.length === 1
      ? this.bySortKey(query, plan.field, folded)
      : this.byGroups(query, plan.field, folded);
  }

  private byCondition(query: UserQuery, plan: ConditionPlan, folded: ReadonlySet<string>): MaybePromise<FoundPage> {
    const { source } = this;
    // An exact plan is one `eq`: its range is one key.
    if (
      source.holdersOfKey !== undefined &&
      plan.exact &&
      plan.field.unique &&
      query.sort.length === 0 &&
      !query.count
    ) {
      throwIfGone(query.signal);
      return source.holdersOfKey(plan.field, plan.range.low).then((users) => heldPage(query, users));
    }
    const ids = source.idsInRange(plan.field, plan.range);
    if (ids instanceof Promise) return ids.then((read) => this.ofCandidates(query, read, folded, false));
    return this.ofCandidates(query, ids, folded, plan.exact);
  }

  /**
   * The page of the users a condition's range names, `found` (maybe twice,
   * in any order); `exact`: each of them matches, if read in the same stretch.
   */
  private ofCandidates(query: UserQuery, found: readonly number[], folded: ReadonlySet<string>, exact: boolean) {
    const ids = found.length < 2 ? found : [...new Set(found)].sort((a, b) => a - b);
    if (query.sort.length === 0 && !query.count) return this.inIdOrder(query, ids, folded, exact);
    const run = () => this.allOf(query, ids, folded);
    return ids.length > this.bounds.step ? this.bounds.inTurn(run) : run();
  }

  /**
   * The candidates after the cursor, read in id order a step at a time
   * until the page is full: at once when one step reads them all and the
   * source answers at once (a unique field's `eq` names one user at most).
   */
  private inIdOrder(query: UserQuery, candidates: readonly number[], folded: ReadonlySet<string>, exact: boolean) {
    const after = query.after?.id ?? 0;
    const ids = after === 0 ? candidates : candidates.filter((id) => id > after);
    const { step } = this.bounds;
    throwIfGone(query.signal);
    const first = this.source.usersOf(ids.length <= step ? ids : ids.slice(0, step));
    // Users read at once with their candidates, all in one step, hold the keys the index named.
    const matcher = (inStep: boolean) =>
      inStep && exact && ids.length <= step ? everyUser : textMatcher(query.filter!, folded);
    const taken = (users: readonly ScannedUser[], page: IdOrderPage) =>
      page.take(users) ?? (ids.length <= step ? page.done() : this.restInIdOrder(query, ids, page));
    if (first instanceof Promise)
      return first.then((users) => taken(users, new IdOrderPage(query.limit, matcher(false))));
    return taken(first, new IdOrderPage(query.limit, matcher(true)));
  }

  /** The steps of `inIdOrder` after the first. */
  private async restInIdOrder(query: UserQuery, ids: readonly number[], page: IdOrderPage): Promise<FoundPage> {
    for (let from = this.bounds.step; from < ids.length; from += this.bounds.step) {
      const full = page.take(await this.usersOf(ids.slice(from, from + this.bounds.step), false, query.signal));
      if (full !== undefined) return full;
    }
    return page.done();
  }

  /** A sort or a count over the candidates: every one examined. */
  private async allOf(query: UserQuery, ids: readonly number[], folded: ReadonlySet<string>): Promise<FoundPage> {
    const matched = new BestMatches(query, folded);
    for (let from = 0; from < ids.length; from += this.bounds.step)
      for (const user of await this.usersOf(ids.slice(from, from + this.bounds.step), from === 0, query.signal))
        matched.offer(user);
    return matched.page();
  }

  /**
   * A sort on one declared key: its order in the index is the listing's, read from the cursor until the page is full.
   */
  private async bySortKey(query: UserQuery, field: FieldDeclaration, folded: ReadonlySet<string>) {
    const descending = query.sort[0]!.descending;
    let place = query.after && placeOf(query.after, query.after.id);
    const found: Found[] = [];
    let examined = 0;
    for (let first = true; ; first = false) {
      // Without a filter every user matches: the first step reads no more than the page and the one that shows more
      // follow.
      const size = first && query.filter === undefined ? Math.min(this.bounds.step, query.limit + 1) : this.bounds.step;
      const step = await nextStep(() => this.sortStep(field, descending, place, size), first, query.signal);
      for (let i = 0; i < step.entries.length; i++) {
        const entry = step.entries[i]!;
        place = entry;
        examined++;
        const user = step.users[i];
        const one =
          user && (step.inStep ? inStepFound(user, entry, query, folded) : examine(user, entry.key, query, folded));
        if (one === undefined || !one.matched) continue;
        if (found.length === query.limit) return this.withTotal(query, pageOf(found, true));
        found.push(one.found);
      }
      if (step.entries.length < size) return this.withTotal(query, pageOf(found, false));
      // The budget ran out: the next page goes on after the last user examined.
      if (query.filter !== undefined && examined >= this.bounds.budget)
        return { ...pageOf(found, false), next: { id: place!.id, values: [keyValue(place!.key) ?? null] } };
    }
  }

  /**
   * A sort on more keys, the first declared: the users that tie on the
   * first are read together and ordered by the rest. The cursor's group is
   * read again from its start, and the users up to the cursor dropped.
   */
  private async byGroups(query: UserQuery, field: FieldDeclaration, folded: ReadonlySet<string>) {
    const descending = query.sort[0]!.descending;
    let place = query.after && placeOf(query.after, 0);
    const found: Found[] = [];
    let group: IndexEntry[] = [];
    let examined = 0;
    for (let first = true; ; first = false) {
      const entries = await nextStep(
        () => this.source.sortedAfter(field, descending, place, this.bounds.step),
        first,
        query.signal,
      );
      for (const entry of entries) {
        if (group.length > 0 && entry.key !== group[0]!.key) {
          const last = await this.takeGroup(group, query, folded, found);
          if (found.length > query.limit) return this.withTotal(query, pageOf(found.slice(0, query.limit), true));
          examined += group.length;
          group = [];
          // The budget ran out: the next page goes on after the last user examined, when that is past the cursor.
          if (query.filter !== undefined && examined >= this.bounds.budget && this.isPast(last, query))
            return { ...pageOf(found, false), next: last };
        }
        group.push(entry);
        place = entry;
      }
      if (entries.length < this.bounds.step) break;
    }
    await this.takeGroup(group, query, folded, found);
    return this.withTotal(query, pageOf(found.slice(0, query.limit), found.length > query.limit));
  }

  /** Adds the users of one group that come after the cursor to `found`, in order; the group's last place, if any. */
  private async takeGroup(
    group: readonly IndexEntry[],
    query: UserQuery,
    folded: ReadonlySet<string>,
    found: Found[],
  ): Promise<SortEntry | undefined> {
    const users = await this.usersById(group);
    const taken: Found[] = [];
    let last: SortEntry | undefined;
    for (const entry of group) {
      const user = users.get(entry.id);
      const one = user && examine(user, entry.key, query, folded);
      if (one === undefined) continue;
      const { entry: place } = one.found;
      if (last === undefined || compareSortEntries(place, last, query.sort) > 0) last = place;
      if (one.matched && (query.after === undefined || compareSortEntries(place, query.after, query.sort) > 0))
        taken.push(one.found);
    }
    taken.sort((a, b) => compareSortEntries(a.entry, b.entry, query.sort));
    found.push(...taken);
    return last;
  }

  private isPast(place: SortEntry | undefined, query: UserQuery): place is SortEntry {
    return place !== undefined && (query.after === undefined || compareSortEntries(place, query.after, query.sort) > 0);
  }

  /** `page` with the number of users, for `count=true` (a sort served without a filter). */
  private async withTotal(query: UserQuery, page: FoundPage): Promise<FoundPage> {
    return query.count ? { ...page, total: await this.source.userCount() } : page;
  }

  /**
   * A step of a sort: up to `size` entries after `place` and the user of
   * each at its position (undefined for one gone). `inStep` when the
   * source answered both at once: then each user holds its entry's key
   * (IndexSource).
   */
  private sortStep(
    field: FieldDeclaration,
    descending: boolean,
    place: IndexEntry | undefined,
    size: number,
  ): MaybePromise<SortStep> {
    const entries = this.source.sortedAfter(field, descending, place, size);
    if (entries instanceof Promise)
      return entries.then(async (read) => ({
        entries: read,
        users: byPosition(read, await this.usersById(read)),
        inStep: false,
      }));
    if (entries.length === 0) return { entries, users: [], inStep: true };
    const users = this.source.usersOf(entries.map((e) => e.id));
    if (users instanceof Promise)
      return users.then((read) => ({ entries, users: byPosition(entries, mapById(read)), inStep: false }));
    return { entries, users: inOrderOf(entries, users), inStep: true };
  }

  private usersById(entries: readonly IndexEntry[]): MaybePromise<Map<number, ScannedUser>> {
    if (entries.length === 0) return new Map();
    const users = this.source.usersOf(entries.map((e) => e.id));
    return users instanceof Promise ? users.then(mapById) : mapById(users);
  }

  private usersOf(ids: readonly number[], first: boolean, signal: FindSignal | undefined) {
    return nextStep(() => this.source.usersOf(ids), first, signal);
  }
}

type ConditionPlan = Extract<IndexPlan, { kind: 'condition' }>;

const everyUser = () => true;

/** The page of a unique field's `eq` from its holders, read with their keys: each matches. */
function heldPage(query: UserQuery, users: readonly ScannedUser[]): FoundPage {
  const after = query.after?.id ?? 0;
  const page = new IdOrderPage(query.limit, everyUser);
  return page.take(users.filter((user) => user.id > after)) ?? page.done();
}

/** The matches of a page in id order, taken a step of users at a time. */
class IdOrderPage {
  private readonly found: Found[] = [];

  constructor(
    private readonly limit: number,
    private readonly matchesText: (json: string) => boolean,
  ) {}

  /** Takes the matches among `users`; the page once a match follows a full one. */
  take(users: readonly ScannedUser[]): FoundPage | undefined {
    for (const user of users) {
      if (!this.matchesText(user.json)) continue;
      // A match past the page: the page is full, and more follow it.
      if (this.found.length === this.limit) return pageOf(this.found, true);
      this.found.push({ user, entry: { id: user.id, values: [] } });
    }
    return undefined;
  }

  /** The page when no more users follow. */
  done(): FoundPage {
    return pageOf(this.found, false);
  }
}

/** A step of a sort on one key (IndexedFinds.sortStep). */
interface SortStep {
  readonly entries: readonly IndexEntry[];
  /** The user of each entry, at its position. */
  readonly users: readonly (ScannedUser | undefined)[];
  readonly inStep: boolean;
}

function mapById(users: readonly ScannedUser[]): Map<number, ScannedUser> {
  return new Map(users.map((u) => [u.id, u]));
}

function byPosition(entries: readonly IndexEntry[], users: ReadonlyMap<number, ScannedUser>) {
  return entries.map((entry) => users.get(entry.id));
}

/**
 * The users of `entries` at their positions, from `users`, which holds
 * those that exist in the order of the entries (IndexSource.usersOf; a
 * sort's entries name each user once): one walk, where a map of them
 * would hash each.
 */
function inOrderOf(entries: readonly IndexEntry[], users: readonly ScannedUser[]) {
  const aligned = new Array<ScannedUser | undefined>(entries.length);
  let next = 0;
  for (let i = 0; i < entries.length; i++) {
    const user = users[next];
    if (user?.id === entries[i]!.id) {
      aligned[i] = user;
      next++;
    }
  }
  return aligned;
}

/**
 * The place in the order of a user found by its sort entry alone: its
 * value is read back from the key only when asked, which a page does for
 * its last user (the cursor), not for every one.
 */
class KeyedPlace implements SortEntry {
  constructor(
    readonly id: number,
    private readonly key: string,
  ) {}

  get values(): SortEntry['values'] {
    return [keyValue(this.key) ?? null];
  }
}

/**
 * `examine` of a user that holds its entry's key (read in one stretch with
 * it): without a filter, the key gives its sort value and nothing needs
 * parsing (keyValue undoes valueKey, and the index folds as the query does).
 */
function inStepFound(user: ScannedUser, entry: IndexEntry, query: UserQuery, folded: ReadonlySet<string>) {
  if (query.filter !== undefined) return examine(user, entry.key, query, folded);
  return { found: { user, entry: new KeyedPlace(user.id, entry.key) } as Found, matched: true };
}

/**
 * A user read for its sort entry `key`, with its place in the order and
 * whether it matches; undefined when it changed since the entry was read
 * (it is found at its new place).
 */
function examine(user: ScannedUser, key: string, query: UserQuery, folded: ReadonlySet<string>) {
  const value: unknown = JSON.parse(user.json);
  const values = sortValuesOf(value, query.sort, folded);
  if (keyOf(values[0]!) !== key) return undefined;
  const matched = query.filter === undefined || matches(query.filter, value, folded);
  return { found: { user, entry: { id: user.id, values } } as Found, matched };
}

/** The index key of a sort value (already folded where the field is). */
function keyOf(value: SortEntry['values'][number]): string {
  return valueKey(value, false) ?? LAST_KEY;
}

/** The place in a sort index of a cursor's position, at `id` within its first value. */
function placeOf(after: SortEntry, id: number): IndexEntry {
  return { key: keyOf(after.values[0] ?? null), id };
}
