/**
 * Index entries (a key and a user's id) kept in order, by key then id: a
 * list of sorted chunks of at most 2 * CHUNK entries. An insert or a delete
 * moves the entries of one chunk and, when a chunk splits or empties, the
 * chunk list, never all entries: with a million entries a write costs
 * microseconds, where one sorted array would move megabytes. Reads are by
 * position (after an entry), so a reader that yields between its steps
 * holds nothing a write could invalidate.
 *
 * A chunk holds its keys and its ids in two arrays, not an object an
 * entry: a million entries take 16 MB beside their keys instead of 48, and
 * entries with equal keys share one string (the insert takes its
 * neighbour's), so a field of few values costs little more than its ids.
 */
import type { IndexEntry } from '../index-find.js';

export const CHUNK = 512;

/** Entries as two lists of one length: `(keys[i], ids[i])`. */
export interface EntryList {
  readonly keys: string[];
  readonly ids: number[];
}

type Chunk = EntryList;

/** Where an entry is, or would be: chunk and offset. */
interface Position {
  chunk: number;
  at: number;
}

/** The order of the entry at `at` of `chunk` against `(key, id)`. */
function compareAt(chunk: Chunk, at: number, key: string, id: number): number {
  const own = chunk.keys[at]!;
  return own < key ? -1 : own > key ? 1 : chunk.ids[at]! - id;
}

/** A field of at most this many values (an age, a status) is sorted by counting its users a value. */
const FEW_KEYS = 1024;

function ascending(ids: readonly number[]): boolean {
  for (let i = 1; i < ids.length; i++) if (ids[i - 1]! > ids[i]!) return false;
  return true;
}

/**
 * The positions of `keys` in key order by counting them a key, equal keys
 * in their order in `keys` (whose ids ascend, so by id); undefined past FEW_KEYS keys.
 */
function countedOrder(keys: readonly string[]): number[] | undefined {
  const counts = new Map<string, number>();
  for (const key of keys) {
    counts.set(key, (counts.get(key) ?? 0) + 1);
    if (counts.size > FEW_KEYS) return undefined;
  }
  const next = new Map<string, number>();
  let start = 0;
  for (const key of [...counts.keys()].sort()) {
    next.set(key, start);
    start += counts.get(key)!;
  }
  const order = new Array<number>(keys.length);
  for (let i = 0; i < keys.length; i++) {
    const at = next.get(keys[i]!)!;
    order[at] = i;
    next.set(keys[i]!, at + 1);
  }
  return order;
}

function comparedOrder(keys: readonly string[], ids: readonly number[]): number[] {
  return positions(keys).sort((a, b) => compareKeys(keys[a]!, keys[b]!) || ids[a]! - ids[b]!);
}

function positions(keys: readonly string[]): number[] {
  const order = new Array<number>(keys.length);
  for (let i = 0; i < keys.length; i++) order[i] = i;
  return order;
}

function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export class SortedEntries {
  private readonly chunks: Chunk[] = [];

  /**
   * The entries `(keys[i], ids[i])`, in any order, each pair once: sorted
   * once and cut into chunks, where inserting them one at a time would
   * move a chunk's entries for each.
   */
  static of(keys: readonly string[], ids: readonly number[]): SortedEntries {
    const order = (ascending(ids) ? countedOrder(keys) : undefined) ?? comparedOrder(keys, ids);
    const entries = new SortedEntries();
    let chunk: Chunk = { keys: [], ids: [] };
    let previous: string | undefined;
    for (const i of order) {
      if (chunk.keys.length === CHUNK) {
        entries.chunks.push(chunk);
        chunk = { keys: [], ids: [] };
      }
      const key = keys[i]!;
      if (key !== previous) previous = key;
      chunk.keys.push(previous);
      chunk.ids.push(ids[i]!);
    }
    if (chunk.keys.length > 0) entries.chunks.push(chunk);
    return entries;
  }

  /** The entries of `chunks`, in order and none longer than CHUNK (as `parts` gave them), taken as they are. */
  static ofParts(chunks: readonly EntryList[]): SortedEntries {
    const entries = new SortedEntries();
    for (const chunk of chunks) if (chunk.keys.length > 0) entries.chunks.push(chunk);
    return entries;
  }

  /** The entries in order, as the chunks that hold them: read before the next write changes them. */
  parts(): readonly EntryList[] {
    return this.chunks;
  }

  /** A copy of the entries whose keys are below `key`. */
  below(key: string): SortedEntries {
    const copy = new SortedEntries();
    const end = this.lowerBound(key, -Infinity, false);
    for (let i = 0; i < end.chunk; i++) {
      const { keys, ids } = this.chunks[i]!;
      copy.chunks.push({ keys: keys.slice(), ids: ids.slice() });
    }
    const last = this.chunks[end.chunk];
    if (last !== undefined && end.at > 0)
      copy.chunks.push({ keys: last.keys.slice(0, end.at), ids: last.ids.slice(0, end.at) });
    return copy;
  }

  /** How many entries have keys below `key`. */
  countBelow(key: string): number {
    const end = this.lowerBound(key, -Infinity, false);
    let count = end.at;
    for (let i = 0; i < end.chunk; i++) count += this.chunks[i]!.keys.length;
    return count;
  }

  /** Each key below `end` that two entries or more hold, with their ids, in key order. */
  sharedKeys(end: string): { key: string; ids: number[] }[] {
    const shared: { key: string; ids: number[] }[] = [];
    let previous: { key: string; id: number } | undefined;
    for (const { keys, ids } of this.chunks)
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i]!;
        if (key >= end) return shared;
        if (previous?.key === key) {
          const last = shared.at(-1);
          if (last?.key === key) last.ids.push(ids[i]!);
          else shared.push({ key, ids: [previous.id, ids[i]!] });
        }
        previous = { key, id: ids[i]! };
      }
    return shared;
  }

  insert(key: string, id: number): void {
    if (this.chunks.length === 0) {
      this.chunks.push({ keys: [key], ids: [id] });
      return;
    }
    const { chunk, at } = this.lowerBound(key, id, true);
    const entries = this.chunks[chunk]!;
    if (at < entries.keys.length && compareAt(entries, at, key, id) === 0) return;
    entries.keys.splice(at, 0, this.sharedKey(key, chunk, at));
    entries.ids.splice(at, 0, id);
    if (entries.keys.length > 2 * CHUNK)
      this.chunks.splice(
        chunk,
        1,
        { keys: entries.keys.slice(0, CHUNK), ids: entries.ids.slice(0, CHUNK) },
        { keys: entries.keys.slice(CHUNK), ids: entries.ids.slice(CHUNK) },
      );
  }

  delete(key: string, id: number): void {
    const { chunk, at } = this.lowerBound(key, id, false);
    const entries = this.chunks[chunk];
    if (entries === undefined || at >= entries.keys.length || compareAt(entries, at, key, id) !== 0) return;
    entries.keys.splice(at, 1);
    entries.ids.splice(at, 1);
    if (entries.keys.length === 0) this.chunks.splice(chunk, 1);
  }

  /** Up to `limit` entries after `(key, id)`, ascending; from the first with no place given. */
  after(place: IndexEntry | undefined, limit: number): IndexEntry[] {
    const out: IndexEntry[] = [];
    let { chunk, at } = place === undefined ? { chunk: 0, at: 0 } : this.lowerBound(place.key, place.id + 1, false);
    for (; chunk < this.chunks.length && out.length < limit; chunk++, at = 0) {
      const { keys, ids } = this.chunks[chunk]!;
      const end = Math.min(keys.length, at + limit - out.length);
      for (let i = at; i < end; i++) out.push({ key: keys[i]!, id: ids[i]! });
    }
    return out;
  }

  /**
   * Visits the entries from the first at or after `(key, id)` on, ascending,
   * until `visit` returns false: a range is read where it lies, with no
   * copy of the entries past its end.
   */
  walk(key: string, id: number, visit: (key: string, id: number) => boolean): void {
    let { chunk, at } = this.lowerBound(key, id, false);
    for (; chunk < this.chunks.length; chunk++, at = 0) {
      const { keys, ids } = this.chunks[chunk]!;
      for (let i = at; i < keys.length; i++) if (!visit(keys[i]!, ids[i]!)) return;
    }
  }

  /** Up to `limit` ids of the entries with `key` and an id above `afterId`, ascending. */
  idsOf(key: string, afterId: number, limit: number): number[] {
    const found: number[] = [];
    if (limit <= 0) return found;
    this.walk(key, afterId + 1, (own, id) => {
      if (own !== key) return false;
      found.push(id);
      return found.length < limit;
    });
    return found;
  }

  /** The greatest key below `key`, if any. */
  keyBelow(key: string): string | undefined {
    const { chunk, at } = this.lowerBound(key, 0, false);
    if (at > 0) return this.chunks[chunk]!.keys[at - 1]!;
    return this.chunks[chunk - 1]?.keys.at(-1);
  }

  /** `key`, or the equal string of the entry beside `at` of `chunk`, which it then shares. */
  private sharedKey(key: string, chunk: number, at: number): string {
    const { keys } = this.chunks[chunk]!;
    const before = at > 0 ? keys[at - 1] : this.chunks[chunk - 1]?.keys.at(-1);
    if (before === key) return before;
    const next = at < keys.length ? keys[at] : this.chunks[chunk + 1]?.keys[0];
    return next === key ? next : key;
  }

  /**
   * The first entry at or after `(key, id)`. `forInsert`: past the end, the
   * last chunk's end, where an insert goes; else the end of the chunks.
   */
  private lowerBound(key: string, id: number, forInsert: boolean): Position {
    let low = 0;
    let high = this.chunks.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      const entries = this.chunks[middle]!;
      if (compareAt(entries, entries.keys.length - 1, key, id) < 0) low = middle + 1;
      else high = middle;
    }
    if (low === this.chunks.length)
      return forInsert ? { chunk: low - 1, at: this.chunks[low - 1]!.keys.length } : { chunk: low, at: 0 };
    const entries = this.chunks[low]!;
    let from = 0;
    let to = entries.keys.length;
    while (from < to) {
      const middle = (from + to) >>> 1;
      if (compareAt(entries, middle, key, id) < 0) from = middle + 1;
      else to = middle;
    }
    return { chunk: low, at: from };
  }
}
