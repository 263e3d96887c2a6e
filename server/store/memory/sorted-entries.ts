/**
 * Index entries (a key and a user's id) kept in order, by key then id: a
 * list of sorted chunks of at most CHUNK entries. An insert or a delete
 * moves the entries of one chunk and, when a chunk splits or empties, the
 * chunk list, never all entries: with a million entries a write costs
 * microseconds, where one sorted array would move megabytes. Reads are by
 * position (after an entry), so a reader that yields between its steps
 * holds nothing a write could invalidate.
 */
import type { IndexEntry } from '../index-find.js';

const CHUNK = 512;

function compare(a: IndexEntry, key: string, id: number): number {
  return a.key < key ? -1 : a.key > key ? 1 : a.id - id;
}

/** Where an entry is, or would be: chunk and offset. */
interface Position {
  chunk: number;
  at: number;
}

export class SortedEntries {
  private readonly chunks: IndexEntry[][] = [];

  /** Each key that two entries or more hold, with their ids, in key order. */
  sharedKeys(): { key: string; ids: number[] }[] {
    const shared: { key: string; ids: number[] }[] = [];
    let previous: IndexEntry | undefined;
    for (const entries of this.chunks)
      for (const entry of entries) {
        if (previous?.key === entry.key) {
          const last = shared.at(-1);
          if (last?.key === entry.key) last.ids.push(entry.id);
          else shared.push({ key: entry.key, ids: [previous.id, entry.id] });
        }
        previous = entry;
      }
    return shared;
  }

  insert(key: string, id: number): void {
    if (this.chunks.length === 0) {
      this.chunks.push([{ key, id }]);
      return;
    }
    const { chunk, at } = this.lowerBound(key, id, true);
    const entries = this.chunks[chunk]!;
    if (at < entries.length && compare(entries[at]!, key, id) === 0) return;
    entries.splice(at, 0, { key, id });
    if (entries.length > 2 * CHUNK) this.chunks.splice(chunk, 1, entries.slice(0, CHUNK), entries.slice(CHUNK));
  }

  delete(key: string, id: number): void {
    const { chunk, at } = this.lowerBound(key, id, false);
    const entries = this.chunks[chunk];
    if (entries === undefined || at >= entries.length || compare(entries[at]!, key, id) !== 0) return;
    entries.splice(at, 1);
    if (entries.length === 0) this.chunks.splice(chunk, 1);
  }

  /** Up to `limit` entries after `(key, id)`, ascending; from the first with no place given. */
  after(place: IndexEntry | undefined, limit: number): IndexEntry[] {
    const out: IndexEntry[] = [];
    let { chunk, at } = place === undefined ? { chunk: 0, at: 0 } : this.lowerBound(place.key, place.id + 1, false);
    for (; chunk < this.chunks.length && out.length < limit; chunk++, at = 0) {
      const entries = this.chunks[chunk]!;
      const end = Math.min(entries.length, at + limit - out.length);
      for (let i = at; i < end; i++) out.push(entries[i]!);
    }
    return out;
  }

  /**
   * Visits the entries from the first at or after `(key, id)` on, ascending,
   * until `visit` returns false: a range is read where it lies, with no
   * copy of the entries past its end.
   */
  walk(key: string, id: number, visit: (entry: IndexEntry) => boolean): void {
    let { chunk, at } = this.lowerBound(key, id, false);
    for (; chunk < this.chunks.length; chunk++, at = 0) {
      const entries = this.chunks[chunk]!;
      for (let i = at; i < entries.length; i++) if (!visit(entries[i]!)) return;
    }
  }

  /** Up to `limit` ids of the entries with `key` and an id above `afterId`, ascending. */
  idsOf(key: string, afterId: number, limit: number): number[] {
    const ids: number[] = [];
    for (const entry of this.after({ key, id: afterId }, limit)) {
      if (entry.key !== key) break;
      ids.push(entry.id);
    }
    return ids;
  }

  /** The greatest key below `key`, if any. */
  keyBelow(key: string): string | undefined {
    const { chunk, at } = this.lowerBound(key, 0, false);
    if (at > 0) return this.chunks[chunk]![at - 1]!.key;
    return this.chunks[chunk - 1]?.at(-1)?.key;
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
      if (compare(this.chunks[middle]!.at(-1)!, key, id) < 0) low = middle + 1;
      else high = middle;
    }
    if (low === this.chunks.length)
      return forInsert ? { chunk: low - 1, at: this.chunks[low - 1]!.length } : { chunk: low, at: 0 };
    const entries = this.chunks[low]!;
    let from = 0;
    let to = entries.length;
    while (from < to) {
      const middle = (from + to) >>> 1;
      if (compare(entries[middle]!, key, id) < 0) from = middle + 1;
      else to = middle;
    }
    return { chunk: low, at: from };
  }
}
