/**
 * The holder of each key of a unique field, for an `eq` and a write's
 * uniqueness check: one lookup in a table (key-table.ts), where the
 * field's sorted entries take a binary search that waits on memory at
 * each step.
 *
 * The table is filled from the sorted entries after they are built, a step
 * at a time between turns of the event loop: filling a million keys takes
 * about half a second, which a start or a declaration would otherwise
 * wait for, on top of the peak of the index's own build. Until it is
 * full, and for a key that two users hold at once (between two writes of
 * a batch, or as read back), the holders are read from the sorted entries;
 * once one holder is left the table knows it again. Writes meanwhile
 * change it as they change the entries; the fill reads the entries as they
 * are at each step, after the last one it took.
 */
import { KeyTable } from './key-table.js';
import type { SortedEntries } from './sorted-entries.js';

/** The mark of a key whose holders this table does not know. */
const SHARED = -1;
/** Keys filled in one step: a few milliseconds. */
const FILL_STEP = 20_000;

export class KeyHolders {
  private readonly holder: KeyTable;
  private full = false;
  /** Resolves once the table holds every key (or the index was let go first). */
  readonly filled: Promise<void>;

  /**
   * Holders of the keys below `end` of the entries `entries()` gives at
   * each step, the first step now, the others while `current()` says the
   * index is in use.
   */
  constructor(
    private readonly entries: () => SortedEntries,
    private readonly end: string,
    private readonly current: () => boolean,
  ) {
    this.holder = new KeyTable(entries().countBelow(end));
    // No key is below '', the start.
    this.filled = new Promise((resolve) => this.fill('', 0, resolve));
  }

  add(key: string, id: number): void {
    // One look for the key, as most keys are new; a key held by another is marked shared after.
    const known = this.holder.set(key, id);
    if (known !== undefined && known !== id) this.holder.set(key, SHARED);
  }

  /** After `(key, id)` has left the entries. */
  delete(key: string, id: number): void {
    const known = this.holder.get(key);
    if (known === id) this.holder.delete(key);
    // A shared key is known again once one holder is left: the entries name it.
    else if (known === SHARED) this.learn(key);
  }

  /** The holders of `key` as the entries have them: none, one, or SHARED. */
  private learn(key: string): void {
    const ids = this.entries().idsOf(key, 0, 2);
    if (ids.length === 0) this.holder.delete(key);
    else this.holder.set(key, ids.length === 1 ? ids[0]! : SHARED);
  }

  /** The users that hold `key`, none or one; undefined while not filled or when the key is shared. */
  idsOf(key: string): number[] | undefined {
    if (!this.full) return undefined;
    const id = this.holder.get(key);
    if (id === undefined) return [];
    return id === SHARED ? undefined : [id];
  }

  /** One step of the fill: the entries after `(key, id)`, then the next step in a later turn. */
  private fill(after: string, afterId: number, done: () => void): void {
    let taken = 0;
    let lastKey = after;
    let lastId = afterId;
    this.entries().walk(after, afterId + 1, (key, id) => {
      if (key >= this.end) return false;
      this.add(key, id);
      lastKey = key;
      lastId = id;
      return ++taken < FILL_STEP;
    });
    if (taken < FILL_STEP) {
      this.full = true;
      return done();
    }
    // A timer that does not hold the process open: the table is derived, and a closing process needs none of it.
    setTimeout(() => (this.current() ? this.fill(lastKey, lastId, done) : done()), 0).unref();
  }
}
