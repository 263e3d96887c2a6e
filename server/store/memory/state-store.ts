import { FSYNC_BUCKETS, Histogram } from '../../ops/histogram.js';
import { uniqueConflict, uniqueKeysOf, type FieldDeclaration } from '../../users/declared-fields.js';
import type { UserSchema } from '../../users/user-schema.js';
import {
  decideCreate,
  decideDelete,
  decidePut,
  scopedKey,
  tooManyReservations,
  type DeleteRequest,
  type IdempotencyKey,
  type IdempotentOperation,
  type PutRequest,
  type StoredUser,
  type UniqueViolation,
  type UserRef,
} from '../../users/rules.js';
import { keptRecord, replayOf, type KeyedRequest, type Replay } from '../kept-answer.js';
import type {
  CreateOutcome,
  DeleteOutcome,
  Lookup,
  MaybePromise,
  PutOutcome,
  ReserveOutcome,
  ReserveRequest,
  Revocation,
  Readiness,
  Store,
  StoreStats,
  UserPage,
  UserQuery,
  FoundPage,
  CreateRequest,
  ApiTokenRecord,
  ChangePage,
} from '../store.js';
import { DEFAULT_CHANGES_RETENTION_MS } from '../store.js';
import type { ScannedUser } from '../found-pages.js';
import { UserScans } from '../scan-users.js';
import { firstIdAfter, StoreState, type Mutation } from './state.js';

/**
 * Where a durable store sends its commits: the journal. A log takes each
 * commit before it is applied to the state, and says when it is durable.
 */
export interface CommitLog {
  /**
   * Takes a commit; resolves once it is durable. Throws, changing nothing,
   * when the commit cannot be written (the store has failed, or it is too large).
   */
  append(mutations: readonly Mutation[]): Promise<void>;
  /** Resolves when every commit taken so far is durable; undefined when it already is. */
  durable(): Promise<void> | undefined;
  close(): Promise<void>;
  /** Journal bytes not covered by a snapshot, and each batch's sync time. */
  stats(): { journalBytes: number; fsyncSeconds: Histogram; diskFull?: boolean };
  /** Why the log cannot take writes now, or undefined when it can. */
  unready(): string | undefined;
}

interface StateStoreOptions {
  /** How long a change stays in the feed of changes, in ms (DEFAULT_CHANGES_RETENTION_MS). */
  changesRetentionMs?: number;
  /** The clock of a change's time (tests set it). */
  now?: () => number;
  /** Users a filter with no sort and no count examines per request (FIND_BUDGET); tests set it small. */
  findBudget?: number;
}

/**
 * The store of the memory and journal kinds: the whole live state in memory
 * (`StoreState`), where every operation decides and applies its writes in
 * one synchronous stretch, so two requests never interleave between a check
 * and its write. Without a log (`--store memory`) a write is done when it is
 * applied; with the journal it is done when the log says it is durable, and
 * reads wait for the writes they can see.
 */
export class StateStore implements Store {
  private readonly noLogStats = { journalBytes: 0, fsyncSeconds: new Histogram(FSYNC_BUCKETS) };
  private readonly changeListeners = new Set<() => void>();
  /** True while a call of the change listeners waits for its turn: the changes of one batch make one call. */
  private changesAnnounced = false;
  private readonly scans: UserScans;

  constructor(
    private readonly state: StoreState,
    private readonly log?: CommitLog,
    private readonly options: StateStoreOptions = {},
  ) {
    const userCount = () => this.state.users.size;
    this.scans = new UserScans(
      { usersAfter: (after, limit) => this.usersAfter(after, limit), userCount },
      options.findBudget,
      {
        idsInRange: (field, range) => this.state.fields.idsInRange(field, range),
        sortedAfter: (field, descending, after, limit) =>
          this.state.fields.sortedAfter(field, descending, after, limit),
        usersOf: (ids) => this.usersOf(ids),
        userCount,
      },
    );
  }

  declaredFields(): readonly FieldDeclaration[] {
    return this.state.fields.declared;
  }

  /**
   * Declares `fields` (the data directory's file gives them): the index of
   * each new one built over the users now, in one step with no write
   * between. A refusal (a field to make unique whose values two users hold)
   * is the sentence that names them; nothing changes then.
   */
  declareFields(fields: readonly FieldDeclaration[]): string | undefined {
    return this.state.fields.declare(fields, this.state.users);
  }

  userSchema(): UserSchema | undefined {
    return this.state.schema;
  }

  /**
   * Sets the schema (the data directory's file gives it), with
   * `checkUsers` first checked against every user in one step with no
   * write between; a refusal is the sentence that names those that break
   * it, and nothing changes then.
   */
  setUserSchema(schema: UserSchema | undefined, checkUsers: boolean): string | undefined {
    const refused = checkUsers ? schema?.refusalOver(this.usersInIdOrder()) : undefined;
    if (refused === undefined) this.state.schema = schema;
    return refused;
  }

  private *usersInIdOrder(): Generator<StoredUser> {
    for (const id of this.state.sortedIds) yield this.state.users.get(id)!;
  }

  findUser(ref: UserRef): MaybePromise<Lookup> {
    let found: Lookup;
    if (ref.kind === 'alias') {
      const id = this.state.aliases.get(ref.alias);
      found = id === undefined ? undefined : this.state.users.get(id);
    } else {
      const currentId = this.state.movedTo(ref.id);
      found = currentId === undefined ? this.state.users.get(ref.id) : { kind: 'old-id', currentId };
    }
    return this.settle(found);
  }

  movedTo(id: number): MaybePromise<number | undefined> {
    const currentId = this.state.movedTo(id);
    return currentId === undefined ? undefined : this.settle(currentId);
  }

  listUsers(after: number, limit: number): MaybePromise<UserPage> {
    const ids = this.state.sortedIds;
    const start = firstIdAfter(ids, after);
    const end = Math.min(ids.length, start + limit);
    const items = new Array<string>(end - start);
    const aliases: [number, string][] = [];
    for (let i = start; i < end; i++) {
      const user = this.state.users.get(ids[i]!)!;
      items[i - start] = user.json;
      if (user.alias !== undefined) aliases.push([user.id, user.alias]);
    }
    return this.settle({ items, aliases, next: end < ids.length ? ids[end - 1] : undefined });
  }

  /** Answered once every write the scan saw is durable: those applied before its last step. */
  findUsers(query: UserQuery): MaybePromise<FoundPage> {
    const page = this.scans.find(query, this.state.fields.declared);
    return page instanceof Promise ? page.then((found) => this.settle(found)) : this.settle(page);
  }

  /** The users of `ids` that exist, in that order. */
  private usersOf(ids: readonly number[]): ScannedUser[] {
    const users: ScannedUser[] = [];
    for (const id of ids) {
      const user = this.state.users.get(id);
      if (user !== undefined) users.push(user);
    }
    return users;
  }

  /** A scan's step: the users after `after` in id order, read now. */
  private usersAfter(after: number, limit: number): ScannedUser[] {
    const ids = this.state.sortedIds;
    const start = firstIdAfter(ids, after);
    const end = Math.min(ids.length, start + limit);
    const users = new Array<ScannedUser>(end - start);
    for (let i = start; i < end; i++) users[i - start] = this.state.users.get(ids[i]!)!;
    return users;
  }

  putUser(request: PutRequest): MaybePromise<PutOutcome> {
    const decision = decidePut(request, this.state);
    const taken = this.takenByPut(decision);
    if (taken !== undefined) return this.settle(taken);
    switch (decision.kind) {
      case 'create':
        return this.commit([{ op: 'put', id: decision.id, alias: decision.alias, json: decision.json }], () => ({
          kind: 'created',
          user: this.state.users.get(decision.id)!,
        }));
      case 'replace':
        return this.commit([{ op: 'put', id: decision.user.id, json: decision.json }], () => ({
          kind: 'replaced',
          user: this.state.users.get(decision.user.id)!,
        }));
      case 'unchanged':
        return this.settle({ kind: 'replaced', user: decision.user });
      case 'move':
        return this.commit([{ op: 'move', from: decision.user.id, to: decision.to, json: decision.json }], () => ({
          kind: 'moved',
          user: this.state.users.get(decision.to)!,
        }));
      default:
        return this.settle(decision);
    }
  }

  deleteUser(request: DeleteRequest): MaybePromise<DeleteOutcome> {
    const decision = decideDelete(request, this.state);
    if (decision.kind !== 'delete') return this.settle(decision);
    const id = decision.user.id;
    return this.commit([{ op: 'delete', id }], () => ({ kind: 'deleted', id, user: decision.user }));
  }

  createUser(request: CreateRequest): MaybePromise<CreateOutcome> {
    const replay = this.replay('create-user', request.idempotency, request.now);
    if (replay !== undefined) return this.settle(replay);
    if (request.body === undefined) return { kind: 'invalid-body' };
    const decision = decideCreate(request.body, this.state);
    if (decision.kind !== 'create') return this.settle(decision);
    const taken = this.takenValue(decision.json, decision.id);
    if (taken !== undefined) return this.settle(taken);
    const mutations: Mutation[] = [{ op: 'put', id: decision.id, json: decision.json }];
    const user: StoredUser = { id: decision.id, alias: undefined, json: decision.json, etag: undefined };
    this.keep(mutations, 'create-user', request.idempotency, { kind: 'created', user }, request.now);
    return this.commit(mutations, () => ({ kind: 'created', user: this.state.users.get(decision.id)! }));
  }

  reserveId(request: ReserveRequest): MaybePromise<ReserveOutcome> {
    const { now } = request;
    const replay = this.replay('reserve-id', request.idempotency, now);
    if (replay !== undefined) return this.settle(replay);
    if (this.state.reservations.size >= request.max) this.state.sweep(now);
    if (this.state.reservations.size >= request.max)
      return this.settle(tooManyReservations(request.max, this.state.liveReservations(now).earliestExpiry, now));
    const id = this.state.nextId();
    if (id === undefined)
      return this.settle({ kind: 'ids-exhausted', detail: 'Every safe integer id has been issued.' });
    const expiresAt = now + request.ttlMs;
    const reserved = { kind: 'reserved', id, expiresAt } as const;
    const mutations: Mutation[] = [{ op: 'reserve', id, expiresAt }];
    this.keep(mutations, 'reserve-id', request.idempotency, reserved, now);
    return this.commit(mutations, () => reserved);
  }

  createToken(token: ApiTokenRecord): MaybePromise<'created' | 'name-taken'> {
    for (const other of this.state.tokens.values()) if (other.name === token.name) return this.settle('name-taken');
    return this.commit([{ op: 'token', token }], () => 'created' as const);
  }

  listTokens(): MaybePromise<readonly ApiTokenRecord[]> {
    return this.settle([...this.state.tokens.values()]);
  }

  findToken(id: string): ApiTokenRecord | undefined {
    // No wait: a token not yet durable has not been shown to anyone, and a
    // revocation not yet durable only refuses sooner.
    return this.state.tokens.get(id);
  }

  revokeToken(id: string): MaybePromise<boolean> {
    if (!this.state.tokens.has(id)) return this.settle(false);
    return this.commit(
      withDescendants(this.state.tokens.values(), id).map((revoked) => ({ op: 'token-revoke', id: revoked })),
      () => true,
    );
  }

  revokeSessions(revocations: readonly Revocation[]): MaybePromise<void> {
    if (revocations.length === 0) return undefined;
    return this.commit(
      revocations.map((r) => ({ op: 'revoke', sessionId: r.sessionId, expiresAt: r.expiresAt })),
      () => undefined,
    );
  }

  isRevoked(sessionId: string): boolean {
    return this.state.isRevoked(sessionId);
  }

  sweep(now: number): MaybePromise<void> {
    this.state.sweep(now);
    // Written like a change, so that a restart does not bring dropped changes back.
    const { changes } = this.state;
    const through = changes.committedBefore(now - (this.options.changesRetentionMs ?? DEFAULT_CHANGES_RETENTION_MS));
    if (through > changes.trimmedThrough) return this.commit([{ op: 'trim-changes', through }], () => undefined);
  }

  changesAfter(after: number, limit: number): MaybePromise<ChangePage> {
    const { changes } = this.state;
    // Read now, answered once durable: every change read was applied, so it is durable then.
    return this.settle({
      changes: changes.after(after, limit),
      trimmedThrough: changes.trimmedThrough,
      lastSeq: changes.lastSeq,
    });
  }

  onChanges(listener: () => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  settled(): Promise<void> | undefined {
    return this.log?.durable();
  }

  stats(now: number): StoreStats {
    const figures = this.log?.stats() ?? this.noLogStats;
    return { users: this.state.users.size, reservations: this.state.liveReservations(now).count, ...figures };
  }

  close(): Promise<void> {
    return this.log?.close() ?? Promise.resolve();
  }

  readiness(): Readiness {
    const reason = this.log?.unready();
    return reason === undefined ? { ready: true } : { ready: false, reason };
  }

  /** `value` now, or once every write applied so far is durable. */
  private settle<T>(value: T): MaybePromise<T> {
    const pending = this.log?.durable();
    return pending === undefined ? value : pending.then(() => value);
  }

  /** Applies a commit (after the log took it) and gives its outcome once it is durable. */
  private commit<T>(mutations: readonly Mutation[], outcome: () => T): MaybePromise<T> {
    const durable = this.log?.append(mutations);
    const seq = this.state.changes.lastSeq;
    const at = (this.options.now ?? Date.now)();
    for (const m of mutations) this.state.apply(m, at);
    const result = outcome();
    const changed = this.state.changes.lastSeq !== seq;
    if (durable === undefined) {
      if (changed) this.announceChanges();
      return result;
    }
    return durable.then(() => {
      if (changed) this.announceChanges();
      return result;
    });
  }

  /** Tells the change listeners, once for the changes that became durable together. */
  private announceChanges(): void {
    if (this.changesAnnounced || this.changeListeners.size === 0) return;
    this.changesAnnounced = true;
    queueMicrotask(() => {
      this.changesAnnounced = false;
      for (const listener of this.changeListeners) listener();
    });
  }

  /** The refusal of a put whose decision writes a value another user holds at a unique field. */
  private takenByPut(decision: ReturnType<typeof decidePut>): UniqueViolation | undefined {
    if (decision.kind === 'create') return this.takenValue(decision.json, decision.id);
    if (decision.kind === 'replace' || decision.kind === 'move')
      return this.takenValue(decision.json, decision.user.id);
    return undefined;
  }

  /**
   * The refusal of writing the version `json` of the user `self` (its id
   * before the write) when another user holds a value it holds at a unique
   * field: decided in the same synchronous stretch as the write.
   */
  private takenValue(json: string, self: number): UniqueViolation | undefined {
    const fields = this.state.fields.declared;
    if (!fields.some((f) => f.unique)) return undefined;
    return uniqueConflict(uniqueKeysOf(JSON.parse(json), fields), self, (key) => this.state.fields.holders(key));
  }

  /** The answer kept for a key seen before, or undefined when the key is new (or absent). */
  private replay(operation: IdempotentOperation, key: IdempotencyKey | undefined, now: number): Replay | undefined {
    if (key === undefined) return undefined;
    const kept = this.state.idempotencyRecord(scopedKey(operation, key.key), now);
    return kept === undefined ? undefined : replayOf(kept, key.fingerprint);
  }

  /** Adds the record that keeps the answer to `outcome` under its key to the commit. */
  private keep<Outcome>(
    mutations: Mutation[],
    operation: IdempotentOperation,
    key: KeyedRequest<Outcome> | undefined,
    outcome: Outcome,
    now: number,
  ): void {
    if (key !== undefined)
      mutations.push({ op: 'idempotency', key: scopedKey(operation, key.key), record: keptRecord(key, outcome, now) });
  }
}

/** `--store memory`: fast, and gone on exit. */
export function memoryStore(options: StateStoreOptions = {}): StateStore {
  return new StateStore(new StoreState(), undefined, options);
}

/** `id` and the ids of every token it created, directly or through others, parents first. */
function withDescendants(tokens: Iterable<ApiTokenRecord>, id: string): string[] {
  const all = [...tokens];
  const ids = [id];
  for (let i = 0; i < ids.length; i++) for (const t of all) if (t.parent === ids[i]) ids.push(t.id);
  return ids;
}
