/**
 * The indexes of the declared fields in the memory and journal stores
 * (API.md "Declared fields"): per field, the keys its users hold, which
 * serve conditions and uniqueness, and each user's sort key, which serves
 * sorts (users/index-key.ts). Derived from the users: StoreState.apply
 * keeps them in step with every write, and they are built whole when a
 * field is declared or the state is read back, or taken from the entries
 * a journal store kept on disk at its last stop or compaction
 * (journal/index-cache.ts).
 */
import {
  describeDuplicates,
  namesOf,
  sameDeclaration,
  type FieldDeclaration,
  type UniqueKey,
} from '../../users/declared-fields.js';
import { inRange, isOneKey, keyValue, LAST_KEY, userKeysOf, type KeyRange } from '../../users/index-key.js';
import type { StoredUser } from '../../users/rules.js';
import type { IndexEntry } from '../index-find.js';
import { KeyHolders } from './key-holders.js';
import { SortedEntries, type EntryList } from './sorted-entries.js';

interface FieldIndex {
  readonly field: FieldDeclaration;
  readonly names: readonly string[];
  /**
   * Every key a user holds at the field, with the user's id, read below
   * LAST_KEY. While each user's keys are its sort key alone (no array on
   * the path), these are the very entries of `sorted`, kept once: the first
   * write of a user whose keys differ gives the index its own copy.
   */
  keys: SortedEntries;
  /** Every user's sort key at the field (LAST_KEY when it sorts last), with its id. */
  readonly sorted: SortedEntries;
  /** A unique field's keys by their holder, set once the index is made. */
  holders: KeyHolders | undefined;
}

/** A field's index as kept on disk: its sort entries, and its keys where they differ (SortedEntries.parts). */
export interface SavedIndex {
  readonly field: FieldDeclaration;
  readonly sorted: readonly EntryList[];
  readonly keys: readonly EntryList[] | undefined;
}

/** Indexes kept on disk: their fields, a read of their entries, and the users written since they were saved. */
interface IndexOffer {
  readonly fields: readonly FieldDeclaration[];
  /** The indexes, or undefined when they cannot be read back whole. */
  read(): readonly SavedIndex[] | undefined;
  readonly changed: Changed;
}

export class FieldIndexes {
  private indexes: FieldIndex[] = [];
  /** Taken by the next declare, dropped by any write before it. */
  private offered: IndexOffer | undefined;
  private declaredOnce = false;
  /** The declared fields, in path order: read by every find, so kept rather than made each time. */
  private fields: readonly FieldDeclaration[] = [];
  private readonly inUse = (index: FieldIndex) => this.indexes.includes(index);

  get declared(): readonly FieldDeclaration[] {
    return this.fields;
  }

  /**
   * Resolves once the holders of every unique field are filled (key-holders.ts). The fill's timer does
   * not keep the process alive, so in a process with nothing else pending this never resolves.
   */
  async filled(): Promise<void> {
    await Promise.all(this.indexes.map((index) => index.holders?.filled));
  }

  private setIndexes(indexes: FieldIndex[]): void {
    this.indexes = indexes;
    this.fields = indexes.map((i) => i.field);
  }

  /** Adds the entries of the version `json` of the user `id`. */
  add(id: number, json: string): void {
    this.offered = undefined;
    if (this.indexes.length > 0) this.change(id, json, true);
  }

  /** Removes the entries of a version of the user `id` added before. */
  remove(id: number, json: string): void {
    this.offered = undefined;
    if (this.indexes.length > 0) this.change(id, json, false);
  }

  /**
   * Every index's entries, in order, for the disk: read before the next
   * write changes them, or `copied` to be read later. Undefined until a
   * declare says which fields there are.
   */
  saved(copied = false): SavedIndex[] | undefined {
    if (!this.declaredOnce) return undefined;
    const parts = (entries: SortedEntries) =>
      copied ? entries.parts().map((p) => ({ keys: p.keys.slice(), ids: p.ids.slice() })) : entries.parts();
    return this.indexes.map((index) => ({
      field: index.field,
      sorted: parts(index.sorted),
      keys: index.keys === index.sorted ? undefined : parts(index.keys),
    }));
  }

  /**
   * Offers indexes kept on disk to the next declare, which reads them when
   * it makes one of their fields and takes each it makes instead of
   * building it; the users written since they were saved are entered again.
   */
  offer(offer: IndexOffer): void {
    this.offered = offer;
  }

  /** The offered indexes, read when one of `fields` is theirs; none otherwise. */
  private takeOffer(fields: readonly FieldDeclaration[]): { saved: readonly SavedIndex[]; changed: Changed } {
    const offer = this.offered;
    this.offered = undefined;
    if (offer === undefined || !fields.some((f) => offer.fields.some((o) => sameDeclaration(o, f))))
      return { saved: [], changed: new Map() };
    return { saved: offer.read() ?? [], changed: offer.changed };
  }

  private change(id: number, json: string, add: boolean): void {
    const user: unknown = JSON.parse(json);
    for (const index of this.indexes) enter(index, id, user, add);
  }

  /** The users that hold `key` now. */
  holders(key: UniqueKey): number[] {
    const index = this.indexOf(key.field);
    return index === undefined ? [] : holdersOf(index, key.key);
  }

  /**
   * Declares `fields` over `users`: a field declared as before keeps its
   * index, any other is built. A field to make unique whose values two
   * users hold refuses the whole change, said in a sentence naming the
   * values and their users; nothing changes then.
   */
  declare(fields: readonly FieldDeclaration[], users: Users): string | undefined {
    const inOrder = [...fields].sort((a, b) => (a.path < b.path ? -1 : 1));
    const missing = inOrder.filter((field) => this.indexOf(field) === undefined);
    const { saved, changed } = this.takeOffer(missing);
    const savedOf = (field: FieldDeclaration) => saved.find((s) => sameDeclaration(s.field, field));
    const fresh = buildIndexes(
      missing.filter((field) => savedOf(field) === undefined),
      users,
      this.inUse,
    );
    // Each user written since is parsed once, for every index taken from the disk.
    const since = saved.length === 0 ? new Map<number, unknown>() : parsedUsers(changed);
    const restored = missing.flatMap((field) => {
      const kept = savedOf(field);
      return kept === undefined ? [] : [restoredIndex(kept, since, this.inUse)];
    });
    const refused = [
      ...fresh.map((index) => uniquenessRefusal(index)),
      // A kept index held no key twice when saved: only a user written since can share one.
      ...restored.map((index) => uniquenessRefusal(index, since)),
    ].find((r) => r !== undefined);
    if (refused !== undefined) return refused;
    const built = [...fresh, ...restored];
    this.setIndexes(inOrder.map((field) => this.indexOf(field) ?? built.find((i) => sameDeclaration(i.field, field))!));
    this.declaredOnce = true;
    return undefined;
  }

  /** Builds every index again over `users` (a state read back from disk), uniqueness unchecked: it held before. */
  rebuild(users: Users): void {
    this.setIndexes(buildIndexes(this.declared, users, this.inUse));
  }

  /** The users that hold a key of `field` in `range`, ascending by key, then id. */
  idsInRange(field: FieldDeclaration, range: KeyRange): number[] {
    const index = this.indexOf(field);
    if (index === undefined) return [];
    if (isOneKey(range)) return holdersOf(index, range.low);
    const ids: number[] = [];
    index.keys.walk(range.low, 0, (key, id) => {
      if (inRange(key, range)) ids.push(id);
      // Out of the range and above its low bound: past its end, as is every entry after it.
      else if (key > range.low) return false;
      return true;
    });
    return ids;
  }

  /** Sort entries in the order of index-find.ts's IndexSource.sortedAfter. */
  sortedAfter(field: FieldDeclaration, descending: boolean, after: IndexEntry | undefined, limit: number) {
    const sorted = this.indexOf(field)?.sorted;
    if (sorted === undefined) return [];
    if (!descending) return sorted.after(after, limit);
    const out: IndexEntry[] = [];
    let key = after?.key ?? sorted.keyBelow(LAST_KEY) ?? LAST_KEY;
    let afterId = after?.id ?? 0;
    while (out.length < limit) {
      for (const id of sorted.idsOf(key, afterId, limit - out.length)) out.push({ key, id });
      if (key === LAST_KEY) break;
      key = sorted.keyBelow(key) ?? LAST_KEY;
      afterId = 0;
    }
    return out;
  }

  private indexOf(field: FieldDeclaration): FieldIndex | undefined {
    return this.indexes.find((i) => sameDeclaration(i.field, field));
  }
}

/** The users an index is made over. */
type Users = Iterable<[number, StoredUser]> & { readonly size?: number };

/** Users written since indexes were saved: each one's version now, undefined once it is gone. */
type Changed = ReadonlyMap<number, string | undefined>;

/** The same users, each version parsed (undefined: gone). */
type ChangedUsers = ReadonlyMap<number, unknown>;

function parsedUsers(changed: Changed): ChangedUsers {
  const users = new Map<number, unknown>();
  for (const [id, json] of changed) users.set(id, json === undefined ? undefined : JSON.parse(json));
  return users;
}

/** The index `saved` kept on disk, the users in `changed` (written since it was saved) entered again. */
function restoredIndex(saved: SavedIndex, changed: ChangedUsers, inUse: (index: FieldIndex) => boolean): FieldIndex {
  const entries = (parts: readonly EntryList[]) =>
    SortedEntries.ofParts(changed.size === 0 ? parts : parts.map((part) => without(part, changed)));
  const sorted = entries(saved.sorted);
  const index = withHolders(
    {
      field: saved.field,
      names: namesOf(saved.field),
      keys: saved.keys === undefined ? sorted : entries(saved.keys),
      sorted,
    },
    inUse,
  );
  for (const [id, user] of changed) if (user !== undefined) enter(index, id, user, true);
  return index;
}

/** The entries of `list` whose ids are not in `ids`. */
function without(list: EntryList, ids: ChangedUsers): EntryList {
  const kept: EntryList = { keys: [], ids: [] };
  for (let i = 0; i < list.ids.length; i++)
    if (!ids.has(list.ids[i]!)) {
      kept.keys.push(list.keys[i]!);
      kept.ids.push(list.ids[i]!);
    }
  return kept;
}

/**
 * The indexes of `fields` over `users`: each user parsed once for all of
 * them, and each index's entries sorted once (SortedEntries.of).
 */
function buildIndexes(
  fields: readonly FieldDeclaration[],
  users: Users,
  inUse: (index: FieldIndex) => boolean,
): FieldIndex[] {
  if (fields.length === 0) return [];
  // One sort entry a user: arrays made at their size leave none of the copies that growing them would.
  const expected = users.size ?? 0;
  const built = fields.map((field) => ({
    field,
    names: namesOf(field),
    keys: { keys: [] as string[], ids: [] as number[] },
    sorted: { keys: new Array<string>(expected), ids: new Array<number>(expected) },
    keysAreSortKeys: true,
  }));
  let count = 0;
  for (const [, user] of users) {
    const value: unknown = JSON.parse(user.json);
    for (const index of built) {
      const { sortKey, keys } = userKeysOf(value, index.names, index.field.caseInsensitive);
      index.sorted.keys[count] = sortKey;
      index.sorted.ids[count] = user.id;
      if (index.keysAreSortKeys && !sortKeyAlone(sortKey, keys)) {
        index.keysAreSortKeys = false;
        keysBefore(index.sorted, count, index.keys);
      }
      if (!index.keysAreSortKeys)
        for (const key of keys) {
          index.keys.keys.push(key);
          index.keys.ids.push(user.id);
        }
    }
    count++;
  }
  for (const { sorted } of built) sorted.keys.length = sorted.ids.length = count;
  return built.map(({ field, names, keys, sorted, keysAreSortKeys }) => {
    const bySort = SortedEntries.of(sorted.keys, sorted.ids);
    return withHolders(
      {
        field,
        names,
        // Where each user's keys are its sort key alone, one sort serves both.
        keys: keysAreSortKeys ? bySort : SortedEntries.of(keys.keys, keys.ids),
        sorted: bySort,
      },
      inUse,
    );
  });
}

/** `index` with its holders when its field is unique, filled while `inUse` says the index is. */
function withHolders(index: Omit<FieldIndex, 'holders'>, inUse: (index: FieldIndex) => boolean): FieldIndex {
  const built: FieldIndex = { ...index, holders: undefined };
  if (index.field.unique)
    built.holders = new KeyHolders(
      () => built.keys,
      LAST_KEY,
      () => inUse(built),
    );
  return built;
}

/** The users that hold `key` at the field of `index`. */
function holdersOf(index: FieldIndex, key: string): number[] {
  return index.holders?.idsOf(key) ?? index.keys.idsOf(key, 0, Infinity);
}

/**
 * The keys of the first `count` users of `sorted`, into `keys`: each
 * user's sort key, none under LAST_KEY, as long as the keys are the sort keys
 * (so that until then they are gathered once).
 */
function keysBefore(
  sorted: { keys: string[]; ids: number[] },
  count: number,
  keys: { keys: string[]; ids: number[] },
): void {
  for (let i = 0; i < count; i++)
    if (sorted.keys[i] !== LAST_KEY) {
      keys.keys.push(sorted.keys[i]!);
      keys.ids.push(sorted.ids[i]!);
    }
}

/**
 * Whether a user's keys are its sort key alone, as where no array lies on
 * the path: one key, the sort key itself, or none under LAST_KEY. A user
 * with an array on the path sorts under LAST_KEY, which no key is.
 */
function sortKeyAlone(sortKey: string, keys: readonly string[]): boolean {
  return keys.length === (sortKey === LAST_KEY ? 0 : 1);
}

/**
 * Why a new unique field's index cannot stand: the values two users or more
 * hold, or undefined. With `changed`, only keys of those users are looked at.
 */
function uniquenessRefusal(index: FieldIndex, changed?: ChangedUsers): string | undefined {
  if (!index.field.unique) return undefined;
  const shared = changed === undefined ? index.keys.sharedKeys(LAST_KEY) : sharedKeysOf(index, changed);
  if (shared.length === 0) return undefined;
  return describeDuplicates(
    index.field,
    shared.map(({ key, ids }) => ({ value: keyValue(key)!, ids })),
  );
}

/** The keys of the users in `changed` that two users or more hold at the field of `index`, in key order. */
function sharedKeysOf(index: FieldIndex, changed: ChangedUsers): { key: string; ids: number[] }[] {
  const shared = new Map<string, number[]>();
  for (const user of changed.values()) {
    if (user === undefined) continue;
    for (const key of userKeysOf(user, index.names, index.field.caseInsensitive).keys) {
      const ids = index.keys.idsOf(key, 0, Infinity);
      if (ids.length > 1) shared.set(key, ids);
    }
  }
  return [...shared.keys()].sort().map((key) => ({ key, ids: shared.get(key)! }));
}

/** Adds (or removes) the entries of the user `id`, whose version is `user`. */
function enter(index: FieldIndex, id: number, user: unknown, add: boolean): void {
  const { sortKey, keys } = userKeysOf(user, index.names, index.field.caseInsensitive);
  if (index.keys === index.sorted && !sortKeyAlone(sortKey, keys)) index.keys = index.sorted.below(LAST_KEY);
  if (add) index.sorted.insert(sortKey, id);
  else index.sorted.delete(sortKey, id);
  const ownKeys = index.keys !== index.sorted;
  for (const key of keys)
    if (add) {
      if (ownKeys) index.keys.insert(key, id);
      index.holders?.add(key, id);
    } else {
      if (ownKeys) index.keys.delete(key, id);
      index.holders?.delete(key, id);
    }
}
