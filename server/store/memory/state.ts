import type { IdempotencyRecord, Mutation, UserRecord } from '../store.js';

/**
 * The live state every store keeps in memory, and the one function that
 * changes it (`apply`). A journal replays its records through the same
 * `apply`, so a restarted server reaches exactly the state it had.
 *
 * Time-bounded entries (reservations, idempotency records, revocations)
 * carry their expiry; they are treated as absent once expired and dropped by
 * `sweep`, which needs no record of its own because replay drops them too.
 */
export class StoreState {
  readonly users = new UserTable();
  readonly aliases = new Map<string, number>();
  /** Ids of users in ascending order, for listing. */
  readonly sortedIds: number[] = [];
  /** Id-change variant: old id -> current id, chains collapsed. */
  readonly moved = new Map<number, number>();
  /** Current id -> the old ids that point at it, to collapse chains on the next move. */
  private readonly movedInto = new Map<number, number[]>();
  readonly reservations = new Map<number, number>();
  readonly idempotency = new Map<string, IdempotencyRecord>();
  readonly revokedSessions = new Map<string, number>();
  /** The id high-water mark: every id from 1 to lastId has been issued. */
  lastId = 0;
  /** Ids above lastId issued out of turn, as targets of a move. */
  private readonly claimed = new Set<number>();
  /** About how many bytes the users take in a snapshot: what compaction weighs the journal against. */
  userBytes = 0;

  apply(m: Mutation): void {
    switch (m.op) {
      case 'put': {
        const existing = this.users.get(m.id);
        const alias = existing ? existing.alias : m.alias;
        this.userBytes += existing ? m.json.length - existing.json.length : m.json.length + USER_OVERHEAD + (alias?.length ?? 0);
        this.users.set(m.id, { id: m.id, alias, json: m.json, etag: undefined });
        if (!existing) {
          insertSorted(this.sortedIds, m.id);
          if (alias !== undefined) this.aliases.set(alias, m.id);
        }
        this.reservations.delete(m.id);
        this.markIssued(m.id);
        break;
      }
      case 'delete': {
        const existing = this.users.get(m.id);
        if (!existing) break;
        this.users.delete(m.id);
        this.userBytes -= existing.json.length + USER_OVERHEAD + (existing.alias?.length ?? 0);
        removeSorted(this.sortedIds, m.id);
        if (existing.alias !== undefined) this.aliases.delete(existing.alias);
        break;
      }
      case 'move': {
        const existing = this.users.get(m.from);
        if (!existing) break;
        this.users.delete(m.from);
        this.userBytes += m.json.length - existing.json.length;
        removeSorted(this.sortedIds, m.from);
        this.users.set(m.to, { id: m.to, alias: existing.alias, json: m.json, etag: undefined });
        insertSorted(this.sortedIds, m.to);
        if (existing.alias !== undefined) this.aliases.set(existing.alias, m.to);
        const olds = this.movedInto.get(m.from) ?? [];
        this.movedInto.delete(m.from);
        olds.push(m.from);
        for (const old of olds) this.moved.set(old, m.to);
        this.movedInto.set(m.to, olds);
        this.markIssued(m.to);
        break;
      }
      case 'reserve':
        this.reservations.set(m.id, m.expiresAt);
        this.markIssued(m.id);
        break;
      case 'idempotency':
        this.idempotency.set(m.key, m.record);
        break;
      case 'revoke':
        this.revokedSessions.set(m.sessionId, m.expiresAt);
        break;
    }
  }

  /** Snapshot loading: the id high-water mark and the ids issued out of turn. */
  restoreIssued(lastId: number, claimed: readonly number[]): void {
    this.lastId = lastId;
    this.claimed.clear();
    for (const id of claimed) this.claimed.add(id);
  }

  /** Snapshot loading: an old id that redirects to a user's current id. */
  restoreRedirect(from: number, to: number): void {
    this.moved.set(from, to);
    const olds = this.movedInto.get(to);
    if (olds === undefined) this.movedInto.set(to, [from]);
    else olds.push(from);
  }

  /** The ids issued out of turn, for a snapshot. */
  claimedIds(): Iterable<number> {
    return this.claimed;
  }

  /** True when `id` was ever issued: assigned, reserved, or moved to. */
  isIssued(id: number): boolean {
    return id <= this.lastId || this.claimed.has(id);
  }

  /** The next id to issue in turn, or undefined once the safe integers are used up. */
  nextId(): number | undefined {
    let id = this.lastId + 1;
    while (this.claimed.has(id)) id++;
    return Number.isSafeInteger(id) ? id : undefined;
  }

  isReservationLive(id: number, now: number): boolean {
    const expiresAt = this.reservations.get(id);
    return expiresAt !== undefined && expiresAt > now;
  }

  idempotencyRecord(key: string, now: number): IdempotencyRecord | undefined {
    const record = this.idempotency.get(key);
    return record !== undefined && record.expiresAt > now ? record : undefined;
  }

  isRevoked(sessionId: string): boolean {
    return this.revokedSessions.has(sessionId);
  }

  /** Drops expired reservations, idempotency records and revocations. */
  sweep(now: number): void {
    for (const [id, expiresAt] of this.reservations) if (expiresAt <= now) this.reservations.delete(id);
    for (const [key, record] of this.idempotency) if (record.expiresAt <= now) this.idempotency.delete(key);
    for (const [sid, expiresAt] of this.revokedSessions) if (expiresAt <= now) this.revokedSessions.delete(sid);
  }

  /**
   * Records `id` as issued. The next id in turn raises the high-water mark;
   * an id further up (a client-chosen id of the id-change variant) is kept
   * apart, so the ids it skips stay never-issued.
   */
  private markIssued(id: number): void {
    if (this.isIssued(id)) return;
    if (id !== this.nextId()) {
      this.claimed.add(id);
      return;
    }
    this.lastId = id;
    if (this.claimed.size > 0) for (const claimed of this.claimed) if (claimed <= id) this.claimed.delete(claimed);
  }
}

/**
 * Users by id. Ids are issued in turn from 1, so nearly every user sits in a
 * dense array indexed by its id: a million users load in a fraction of the
 * time of a Map, whose inserts rehash as it grows, in a fifth of the memory.
 * An id far above the others (the target of a move) goes to a Map instead,
 * so one large id cannot make a huge array.
 */
export class UserTable {
  private readonly dense: (UserRecord | undefined)[] = [undefined];
  private readonly sparse = new Map<number, UserRecord>();
  size = 0;

  get(id: number): UserRecord | undefined {
    return this.dense[id] ?? (this.sparse.size === 0 ? undefined : this.sparse.get(id));
  }

  set(id: number, user: UserRecord): void {
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
  *[Symbol.iterator](): IterableIterator<[number, UserRecord]> {
    for (let id = 1; id < this.dense.length; id++) {
      const user = this.dense[id];
      if (user !== undefined) yield [id, user];
    }
    yield* this.sparse;
  }
}

/** How far above the dense ids an id may be and still extend the array. */
const DENSE_GAP = 4096;

/** Per-user bytes in a snapshot besides the representation and alias: tag, id, tabs. */
const USER_OVERHEAD = 16;

/** Index of the first element >= id. */
function lowerBound(sorted: readonly number[], id: number): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (sorted[mid]! < id) low = mid + 1;
    else high = mid;
  }
  return low;
}

// Ids are issued in ascending order, so an insert is almost always an append;
// only a user created late under an old reservation lands in the middle.
function insertSorted(sorted: number[], id: number): void {
  const last = sorted.length === 0 ? 0 : sorted[sorted.length - 1]!;
  if (id > last) {
    sorted.push(id);
    return;
  }
  const at = lowerBound(sorted, id);
  if (sorted[at] !== id) sorted.splice(at, 0, id);
}

function removeSorted(sorted: number[], id: number): void {
  const at = lowerBound(sorted, id);
  if (sorted[at] === id) sorted.splice(at, 1);
}

/** Index in `sorted` of the first id greater than `after`. */
export function firstIdAfter(sorted: readonly number[], after: number): number {
  return lowerBound(sorted, after + 1);
}
