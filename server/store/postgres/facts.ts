import { entityTag } from '../../users/entity-tag.js';
import type { StoredUser, UserFacts, UserRef } from '../../users/rules.js';
import type { UserSchema } from '../../users/user-schema.js';
import type { ApiTokenRecord } from '../store.js';
import type { Tx } from './transaction.js';

/**
 * The facts a decision of users/rules.ts looks at, read inside a
 * transaction before it decides (with the rows it may change locked), so
 * that the rules are the same code for every store. What was not read
 * reads as absent: the loaders below read what a decision can need.
 */
export class LoadedFacts implements UserFacts {
  readonly users = new Map<number, StoredUser>();
  readonly aliases = new Map<string, number>();
  readonly moves = new Map<number, number>();
  readonly reservations = new Map<number, number>();
  lastId = 0;
  claimed = new Set<number>();
  /** The counter and claimed ids as read (`loadCounter`): `writeIssued` writes what changed since. */
  loadedLastId = 0;
  loadedClaimed: ReadonlySet<number> = new Set<number>();
  /** The schema the transaction read with the declarations (`DeclaredFields.lockIn`). */
  schema: UserSchema | undefined = undefined;

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
    return this.moves.get(id);
  }

  isIssued(id: number): boolean {
    return id <= this.lastId || this.claimed.has(id);
  }

  isReservationLive(id: number, now: number): boolean {
    const expiresAt = this.reservations.get(id);
    return expiresAt !== undefined && expiresAt > now;
  }

  nextId(): number | undefined {
    let id = this.lastId + 1;
    while (this.claimed.has(id)) id++;
    return Number.isSafeInteger(id) ? id : undefined;
  }

  /** After issuing `id`: the new high-water mark and the claimed ids it covers, as `StoreState.markIssued` does. */
  issue(id: number): { lastId: number; unclaim: number[]; claim: number | undefined } {
    if (this.isIssued(id)) return { lastId: this.lastId, unclaim: [], claim: undefined };
    if (id !== this.nextId()) return { lastId: this.lastId, unclaim: [], claim: id };
    return { lastId: id, unclaim: [...this.claimed].filter((c) => c <= id), claim: undefined };
  }

  /** Issues `id` in these facts (see `issue`); `writeIssued` then writes the change. */
  markIssued(id: number): void {
    const { lastId, unclaim, claim } = this.issue(id);
    this.lastId = lastId;
    for (const c of unclaim) this.claimed.delete(c);
    if (claim !== undefined) this.claimed.add(claim);
  }
}

/** A users row as the driver gives it: int8 columns as strings. */
interface UserRow {
  id: string;
  alias: string | null;
  json: string;
  etag: string;
}

export function userOf(row: UserRow): StoredUser {
  return { id: Number(row.id), alias: row.alias ?? undefined, json: row.json, etag: row.etag };
}

/** A row to insert for a new version of a user: its entity tag is computed here, once. */
export function userRow(
  id: number,
  alias: string | undefined,
  json: string,
): { id: number; alias: string | null; json: string; etag: string } {
  return { id, alias: alias ?? null, json, etag: entityTag(json) };
}

/** An API token as a row of api_tokens, and back. */
export function tokenRow(t: ApiTokenRecord): Record<string, string | number | null> {
  return {
    id: t.id,
    name: t.name,
    role: t.role,
    hash: t.hash,
    created_by: t.createdBy,
    created_at: t.createdAt,
    expires_at: t.expiresAt ?? null,
    owner_since: t.ownerSince ?? null,
    parent: t.parent ?? null,
  };
}

export function tokenOfRow(r: Record<string, unknown>): ApiTokenRecord {
  return {
    id: r.id as string,
    name: r.name as string,
    role: r.role as ApiTokenRecord['role'],
    hash: r.hash as string,
    createdBy: r.created_by as string,
    createdAt: Number(r.created_at),
    expiresAt: r.expires_at === null ? undefined : Number(r.expires_at),
    ...(r.owner_since !== null && { ownerSince: r.owner_since as string }),
    ...(r.parent !== null && { parent: r.parent as string }),
  };
}

/**
 * The id counter and the ids claimed above it; `lock` holds the counter
 * until the transaction ends. The loaders send their statements together
 * (the driver pipelines them on the transaction's connection, and the
 * database runs them in order): one round trip, not one per statement.
 */
export async function loadCounter(tx: Tx, facts: LoadedFacts, lock: boolean): Promise<void> {
  const [[row], claimed] = await Promise.all([
    lock ? tx`select last_id from id_counter for update` : tx`select last_id from id_counter`,
    tx`select id from claimed_ids`,
  ]);
  facts.lastId = facts.loadedLastId = Number(row!.last_id);
  facts.loadedClaimed = new Set(claimed.map((r) => Number(r.id)));
  facts.claimed = new Set(facts.loadedClaimed);
}

/**
 * The user a reference names, its row locked; for an id, also where it
 * moved and its reservation. The reservation is locked before the user is
 * read, so two creates under one reservation see each other's user. An id
 * that moved names no user: what was read beside the move is left out.
 */
export async function loadTarget(tx: Tx, facts: LoadedFacts, ref: UserRef): Promise<void> {
  if (ref.kind === 'alias') {
    const rows = await tx<UserRow[]>`select id, alias, json, etag from users where alias = ${ref.alias} for update`;
    for (const row of rows) addUser(facts, row);
    return;
  }
  const [[moved], [reservation], rows] = await Promise.all([
    tx`select current_id from moves where old_id = ${ref.id}`,
    tx`select expires_at from reservations where id = ${ref.id} for update`,
    tx<UserRow[]>`select id, alias, json, etag from users where id = ${ref.id} for update`,
  ]);
  if (moved !== undefined) {
    facts.moves.set(ref.id, Number(moved.current_id));
    return;
  }
  if (reservation !== undefined) facts.reservations.set(ref.id, Number(reservation.expires_at));
  for (const row of rows) addUser(facts, row);
}

function addUser(facts: LoadedFacts, row: UserRow): void {
  const user = userOf(row);
  facts.users.set(user.id, user);
  if (user.alias !== undefined) facts.aliases.set(user.alias, user.id);
}

/**
 * Writes what the ids issued since `loadCounter` (`markIssued`) changed
 * about the counter and the claimed ids, the statements sent together.
 * Claimed ids leave only when the counter reaches them.
 */
export async function writeIssued(tx: Tx, facts: LoadedFacts): Promise<void> {
  const writes: Promise<unknown>[] = [];
  if (facts.lastId !== facts.loadedLastId) writes.push(tx`update id_counter set last_id = ${facts.lastId}`);
  if ([...facts.loadedClaimed].some((c) => !facts.claimed.has(c)))
    writes.push(tx`delete from claimed_ids where id <= ${facts.lastId}`);
  const claims = [...facts.claimed].filter((c) => !facts.loadedClaimed.has(c)).map((id) => ({ id }));
  if (claims.length > 0) writes.push(tx`insert into claimed_ids ${tx(claims)}`);
  await Promise.all(writes);
}
