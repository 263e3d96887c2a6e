import type { StoredUser } from '../../users/rules.js';

/**
 * Users by id. Ids are issued in turn from 1, so nearly every user sits in a
 * dense array indexed by its id: a million users load in a fraction of the
 * time of a Map, whose inserts rehash as it grows, in a fifth of the memory.
 * An id far above the others (the target of a move) goes to a Map instead,
 * so one large id cannot make a huge array.
 */
export class UserTable {
  private readonly dense: (StoredUser | undefined)[] = [undefined];
  private readonly sparse = new Map<number, StoredUser>();
  size = 0;

  get(id: number): StoredUser | undefined {
    return this.dense[id] ?? (this.sparse.size === 0 ? undefined : this.sparse.get(id));
  }

  set(id: number, user: StoredUser): void {
    const dense = this.dense;
    if (id < dense.length) {
      if (dense[id] === undefined) this.size += this.sparse.delete(id) ? 0 : 1;
      dense[id] = user;
      return;
    }
    if (id > dense.length + DENSE_GAP) {
      if (!this.sparse.has(id)) this.size++;
      this.sparse.set(id, user);
      return;
    }
    while (dense.length < id) dense.push(undefined);
    dense.push(user);
    this.size += this.sparse.delete(id) ? 0 : 1;
  }

  delete(id: number): boolean {
    if (this.dense[id] !== undefined) {
      this.dense[id] = undefined;
      this.size--;
      return true;
    }
    const had = this.sparse.delete(id);
    if (had) this.size--;
    return had;
  }

  /** [id, user] pairs: the dense ids in ascending order, then the others. */
  *[Symbol.iterator](): IterableIterator<[number, StoredUser]> {
    for (let id = 1; id < this.dense.length; id++) {
      const user = this.dense[id];
      if (user !== undefined) yield [id, user];
    }
    yield* this.sparse;
  }
}

/** How far above the dense ids an id may be and still extend the array. */
const DENSE_GAP = 4096;
