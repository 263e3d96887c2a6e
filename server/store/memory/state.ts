import type { StoredUser, UserFacts } from '../../users/rules.js';
import type { UserSchema } from '../../users/user-schema.js';
import type { IdempotencyRecord } from '../kept-answer.js';
import type { ApiTokenRecord } from '../store.js';
import { ChangeLog } from './change-log.js';
import { FieldIndexes } from './field-indexes.js';
import { UserTable } from './user-table.js';

/** One change to the state; the unit a journal writes (a commit is one or more). */
export type Mutation =
  /** Create or replace a user; creating under a reserved id uses the reservation up. */
  | { op: 'put'; id: number; alias?: string | undefined; json: string }
  /** Delete a user: its id is retired, its alias released. */
  | { op: 'delete'; id: number }
  /** The id-change variant: the user at `from` moves to `to` with a new representation. */
  | { op: 'move'; from: number; to: number; json: string }
  | { op: 'reserve'; id: number; expiresAt: number }
  | { op: 'idempotency'; key: string; record: IdempotencyRecord }
  | { op: 'revoke'; sessionId: string; expiresAt: number }
  | { op: 'token'; token: ApiTokenRecord }
  | { op: 'token-revoke'; id: string }
  /** The feed of changes drops its changes numbered up to `through` (they are older than the retention). */
  | { op: 'trim-changes'; through: number };

/**
 * The live state the memory and journal stores keep in memory, and the one
 * function that changes it (`apply`). A journal replays its records through
 * the same `apply`, so a restarted server reaches exactly the state it had.
 * It is also the `UserFacts` the rules decide on.
 *
 * Time-bounded entries (reservations, idempotency records, revocations)
 * carry their expiry; they are treated as absent once expired and dropped by
 * `sweep`, which needs no record of its own because replay drops them too.
 */
export class StoreState implements UserFacts {
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
  /** API tokens by id, in creation order. */
  readonly tokens = new Map<string, ApiTokenRecord>();
  /** The id high-water mark: every id from 1 to lastId has been issued. */
  lastId = 0;
  /** Ids above lastId issued out of turn, as targets of a move. */
  private readonly claimed = new Set<number>();
  /** About how many bytes the users take in a snapshot: what compaction weighs the journal against. */
  userBytes = 0;
  /** The changes of users kept for the feed of changes. */
  readonly changes = new ChangeLog();
  /** The indexes of the declared fields, kept in step with the users. */
  fields = new FieldIndexes();
  /** The schema every write must fit; undefined: none is set. */
  schema: UserSchema | undefined = undefined;
  /** While set (recovery past a point), the ids of the users each mutation writes. */
  touched: Set<number> | undefined = undefined;

  /**
   * Applies one mutation. With `at` (a commit's time, ms since the epoch), a
   * put, delete or move is also a change of the feed; without it (a
   * snapshot's users, which are state, not changes) it is not.
   */
  apply(m: Mutation, at?: number): void {
    if (at !== undefined) this.recordChange(m, at);
    if (this.touched !== undefined) touchedBy(m, this.touched);
    switch (m.op) {
      case 'put': {
        const existing = this.users.get(m.id);
        const alias = existing ? existing.alias : m.alias;
        this.userBytes += existing
          ? m.json.length - existing.json.length
          : m.json.length + USER_OVERHEAD + (alias?.length ?? 0);
        this.users.set(m.id, { id: m.id, alias, json: m.json, etag: undefined });
        if (existing) this.fields.remove(m.id, existing.json);
        this.fields.add(m.id, m.json);
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
        this.fields.remove(m.id, existing.json);
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
        this.fields.remove(m.from, existing.json);
        this.fields.add(m.to, m.json);
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
      case 'token':
        this.tokens.set(m.token.id, m.token);
        break;
      case 'token-revoke':
        this.tokens.delete(m.id);
        break;
      case 'trim-changes':
        this.changes.trimThrough(m.through);
        break;
    }
  }

  /** The change `m` makes, if it changes a user that way (a delete of nobody does not). */
  private recordChange(m: Mutation, at: number): void {
    if (m.op === 'put') this.changes.record({ op: 'put', id: m.id, json: m.json, at });
    else if (m.op === 'delete' && this.users.get(m.id) !== undefined)
      this.changes.record({ op: 'delete', id: m.id, at });
    else if (m.op === 'move' && this.users.get(m.from) !== undefined)
      this.changes.record({ op: 'move', id: m.to, from: m.from, json: m.json, at });
  }

  /**
   * Takes every field of `other`, a state read back from disk: after a
   * write the disk refused, the memory must hold what is durable, not the
   * writes that were applied but never made it. The declared fields and
   * the schema stay, the indexes built again over the users read back.
   */
  replaceWith(other: StoreState): void {
    const { fields, schema } = this;
    Object.assign(this, other);
    this.fields = fields;
    this.schema = schema;
    fields.rebuild(this.users);
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

  userSchema(): UserSchema | undefined {
    return this.schema;
  }

  userById(id: number): StoredUser | undefined {
    return this.users.get(id);
  }

  userIdOfAlias(alias: string): number | undefined {
    return this.aliases.get(alias);
  }

  movedTo(id: number): number | undefined {
    return this.moved.size === 0 ? undefined : this.moved.get(id);
  }

  isReservationLive(id: number, now: number): boolean {
    const expiresAt = this.reservations.get(id);
    return expiresAt !== undefined && expiresAt > now;
  }

  idempotencyRecord(key: string, now: number): IdempotencyRecord | undefined {
    const record = this.idempotency.size === 0 ? undefined : this.idempotency.get(key);
    return record !== undefined && record.expiresAt > now ? record : undefined;
  }

  isRevoked(sessionId: string): boolean {
    return this.revokedSessions.size !== 0 && this.revokedSessions.has(sessionId);
  }

  /** Live reservations, and when the earliest of them expires (Infinity for none). */
  liveReservations(now: number): { count: number; earliestExpiry: number } {
    let count = 0;
    let earliestExpiry = Infinity;
    for (const expiresAt of this.reservations.values()) {
      if (expiresAt <= now) continue;
      count++;
      if (expiresAt < earliestExpiry) earliestExpiry = expiresAt;
    }
    return { count, earliestExpiry };
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

/** Adds to `ids` the users `m` writes. */
function touchedBy(m: Mutation, ids: Set<number>): void {
  if (m.op === 'put' || m.op === 'delete') ids.add(m.id);
  else if (m.op === 'move') ids.add(m.from).add(m.to);
}
