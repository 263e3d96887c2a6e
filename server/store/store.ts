/**
 * The storage interface: one method per thing the service does with its
 * data. Every write takes its preconditions and decides them inside the
 * store, atomically, with the rules of server/users/rules.ts, and returns a
 * typed outcome that the HTTP layer maps to a status. Nothing outside
 * server/store/ sees how a store keeps its data.
 *
 * Methods return `T | Promise<T>`: the memory and journal stores answer a
 * read synchronously when no write is waiting to be made durable (a GET
 * pays for no promise), an asynchronous store returns promises, and callers
 * handle both. The promises a store keeps:
 *
 * - a write's outcome arrives only once the write is durable;
 * - a read (and a refusal, which can reflect other writes) arrives only once
 *   every write it can see is durable, so no client is shown a write that a
 *   crash could still take back.
 */
import type { Histogram } from '../ops/histogram.js';
import type { FieldDeclaration } from '../users/declared-fields.js';
import type { Filter } from '../users/filter-parse.js';
import type { UserSchema } from '../users/user-schema.js';
import type { DeleteRequest, OldId, PutRequest, Refusal, StoredUser, UserBody, UserRef } from '../users/rules.js';
import type { KeyedRequest, Replay } from './kept-answer.js';
import type { SortEntry, SortKey } from '../users/sort.js';

export type MaybePromise<T> = T | Promise<T>;

/** What a reference names: a user, an old id of one that moved, or nothing. */
export type Lookup = StoredUser | OldId | undefined;

export type PutOutcome =
  { readonly kind: 'created' | 'replaced' | 'moved'; readonly user: StoredUser } | OldId | Refusal;

/** `user`: the version deleted, for a client that asks to see it (Prefer: return=representation). */
export type DeleteOutcome =
  { readonly kind: 'deleted'; readonly id: number; readonly user: StoredUser } | OldId | Refusal;

export interface CreateRequest {
  /** The validated body; undefined when it failed to parse or validate, which is refused unless the key replays. */
  readonly body: UserBody | undefined;
  /** The Idempotency-Key, if any, and the answer to keep under it. */
  readonly idempotency: KeyedRequest<Created> | undefined;
  readonly now: number;
}

export interface Created {
  readonly kind: 'created';
  readonly user: StoredUser;
}

export type CreateOutcome = Created | { readonly kind: 'invalid-body' } | Replay;

export interface ReserveRequest {
  /** The Idempotency-Key, if any, and the answer to keep under it. */
  readonly idempotency: KeyedRequest<Reserved> | undefined;
  readonly now: number;
  /** Milliseconds the reservation stays live. */
  readonly ttlMs: number;
  /** The cap on live reservations (`--max-reservations`). */
  readonly max: number;
}

export interface Reserved {
  readonly kind: 'reserved';
  readonly id: number;
  /** Milliseconds since the epoch. */
  readonly expiresAt: number;
}

export type ReserveOutcome = Reserved | Replay;

export interface UserPage {
  /** The representations, in ascending id order. */
  readonly items: readonly string[];
  /** The id and alias of each listed user that has an alias, in the same order. */
  readonly aliases: readonly (readonly [number, string])[];
  /** The last id of this page when more users follow; undefined on the last page. */
  readonly next: number | undefined;
}

/** What a find asks of its signal (an AbortSignal is one): whether its client is gone. */
export interface FindSignal {
  readonly aborted: boolean;
}

/**
 * A find of `GET /users` (API.md "Finding users"): the users that match a
 * filter, in the order of a sort, from a place in that order. Parsed, so
 * that a store can serve a condition from an index it keeps.
 */
export interface UserQuery {
  /** Undefined: every user matches. */
  readonly filter: Filter | undefined;
  /** No keys: ascending id. */
  readonly sort: readonly SortKey[];
  /** The page starts after this place in the order (a cursor's); undefined: at the start. */
  readonly after: SortEntry | undefined;
  readonly limit: number;
  /** `count=true`: also the number of users the filter matches, all pages together. */
  readonly count: boolean;
  /** Aborted when the client is gone: a scan under way stops at its next step. */
  readonly signal?: FindSignal | undefined;
  /**
   * The paths whose strings compare lowercased, as the request saw the
   * declarations (its cursor was checked against them); undefined: those
   * the store declares case-insensitive now.
   */
  readonly folded?: ReadonlySet<string> | undefined;
}

export interface FoundPage {
  /** The representations, in the query's order. */
  readonly items: readonly string[];
  /** The id and alias of each listed user that has an alias, in the same order. */
  readonly aliases: readonly (readonly [number, string])[];
  /**
   * Where the next page starts when more users may follow: the last item's
   * place, or, when a bounded scan stopped before the end, the place of the
   * last user it examined. Undefined: nothing follows.
   */
  readonly next: SortEntry | undefined;
  /** With `count`: the number of users the filter matches. */
  readonly total?: number | undefined;
}

/** A session to revoke, kept until it would have expired anyway. */
export interface Revocation {
  readonly sessionId: string;
  /** Milliseconds since the epoch. */
  readonly expiresAt: number;
}

/**
 * An API token as a store keeps it: never the token itself, only its
 * SHA-256 (security/api-token.ts makes and checks tokens).
 */
export interface ApiTokenRecord {
  /** The public part of the token: 16 hex digits. */
  readonly id: string;
  /** Unique among the tokens: 1..64 of A-Z a-z 0-9 . _ - */
  readonly name: string;
  readonly role: 'admin' | 'reader';
  /** SHA-256 of the whole token, hex. */
  readonly hash: string;
  /**
   * The account it belongs to: the one that created it, or that created
   * the token that created it. A token from before tokens had owners may
   * name a token here: no account has that name, so it is refused.
   */
  readonly createdBy: string;
  /**
   * When that account was added (its `created`), so that a removed and
   * re-added name owns none of the old tokens; '' for the built-in admin,
   * which is never removed. Undefined in a token from before tokens had
   * owners: the name alone is checked.
   */
  readonly ownerSince?: string | undefined;
  /** The id of the token that created this one, if a token did: revoking that one revokes this one. */
  readonly parent?: string | undefined;
  /** Milliseconds since the epoch. */
  readonly createdAt: number;
  /** Milliseconds since the epoch; undefined: it never expires. */
  readonly expiresAt: number | undefined;
}

/** A change of a user, as the feed of changes gives it: a put, a delete, or a move (the id-change variant). */
export interface Change {
  /** Its number in the store's order of changes: 1, 2, 3, ... with no gap, never reused. */
  readonly seq: number;
  readonly op: 'put' | 'delete' | 'move';
  /** The user's id after the change (a delete: the id deleted). */
  readonly id: number;
  /** A move: the id the user had. */
  readonly from?: number;
  /** A put or a move: the representation after the change. */
  readonly json?: string;
  /** When it was committed, in ms since the epoch (on a restarted journal, at most that late). */
  readonly at: number;
}

/** How long a change stays in the feed of changes unless `--changes-retention` says otherwise: an hour. */
export const DEFAULT_CHANGES_RETENTION_MS = 3_600_000;

/** Changes after a number, and where the kept ones begin and end. */
export interface ChangePage {
  /** Oldest first, numbered without a gap. */
  readonly changes: readonly Change[];
  /** The newest number that retention dropped (0: none): a reader who saw less than it has missed changes. */
  readonly trimmedThrough: number;
  /** The newest change's number (0: none yet). */
  readonly lastSeq: number;
}

export interface Store {
  findUser(ref: UserRef): MaybePromise<Lookup>;
  /**
   * The current id of a user that moved away from `id`, or undefined. Unlike
   * `findUser` it does not wait for pending writes when the answer is
   * "not moved": a PUT asks it before anything else (an old id answers 301).
   */
  movedTo(id: number): MaybePromise<number | undefined>;
  /** Users with ids above `after`, at most `limit` of them. */
  listUsers(after: number, limit: number): MaybePromise<UserPage>;
  /**
   * A page of the users a query finds, in its order (API.md "Finding
   * users"). A filter no index serves is evaluated in bounded steps: with
   * no sort and no count, a page examines a bounded number of users and may
   * come back short, even empty, with `next` where the scan stopped; a sort
   * or a count evaluates every user, a step at a time, never holding the
   * event loop or a connection for more than one step (store/scan-users.ts).
   */
  findUsers(query: UserQuery): MaybePromise<FoundPage>;
  /** The declared fields (API.md "Declared fields") this store applies now: indexed, unique, case-insensitive. */
  declaredFields(): readonly FieldDeclaration[];
  /**
   * The memory and journal stores: declares the fields the data
   * directory's file gives (store/declarations-file.ts), building their
   * indexes; a refusal is a sentence, and nothing changed. PostgreSQL keeps
   * its declarations in the database instead.
   */
  declareFields?(fields: readonly FieldDeclaration[]): string | undefined;
  /** The schema of the users' fields (users/user-schema.ts) every write must fit now; undefined: none is set. */
  userSchema(): UserSchema | undefined;
  /**
   * The memory and journal stores: sets the schema the data directory's
   * file gives (store/schema-file.ts; undefined: none), with `checkUsers`
   * checked against every user first; a refusal is a sentence, and nothing
   * changed. PostgreSQL keeps its schema in the database instead.
   */
  setUserSchema?(schema: UserSchema | undefined, checkUsers: boolean): string | undefined;
  putUser(request: PutRequest): MaybePromise<PutOutcome>;
  deleteUser(request: DeleteRequest): MaybePromise<DeleteOutcome>;
  /** POST /users/new: a user under the next id, kept under its Idempotency-Key if one is given. */
  createUser(request: CreateRequest): MaybePromise<CreateOutcome>;
  /** POST /reservations: the next id reserved, kept under its Idempotency-Key if one is given. */
  reserveId(request: ReserveRequest): MaybePromise<ReserveOutcome>;
  /** A new API token; refused when its name is taken. */
  createToken(token: ApiTokenRecord): MaybePromise<'created' | 'name-taken'>;
  /** Every API token, expired ones included, oldest first. */
  listTokens(): MaybePromise<readonly ApiTokenRecord[]>;
  /** The token with this id, for checking a Bearer credential; does not wait for pending writes. */
  findToken(id: string): MaybePromise<ApiTokenRecord | undefined>;
  /** Removes a token; false when there was none. */
  revokeToken(id: string): MaybePromise<boolean>;
  revokeSessions(revocations: readonly Revocation[]): MaybePromise<void>;
  isRevoked(sessionId: string): MaybePromise<boolean>;
  /** Drops expired reservations, idempotency records and revocations, and the changes older than the retention. */
  sweep(now: number): MaybePromise<void>;
  /**
   * Durable changes of users numbered above `after`, at most `limit`,
   * oldest first (from the oldest kept when `after` is older than that).
   */
  changesAfter(after: number, limit: number): MaybePromise<ChangePage>;
  /** Calls `listener` after new changes became durable (several at once may make one call); the answer stops it. */
  onChanges(listener: () => void): () => void;
  /** Resolves when every write this store has shown is durable; undefined when that is already so. */
  settled(): Promise<void> | undefined;
  /** Figures for GET /metrics. */
  stats(now: number): MaybePromise<StoreStats>;
  /** Whether the store can take writes now (GET /readyz), and why not. */
  readiness(): MaybePromise<Readiness>;
  /** Flushes and releases the store. */
  close(): Promise<void>;
  /**
   * What the instances of a deployment share besides the users, when the
   * store is shared by several instances (PostgreSQL); undefined for the
   * memory and journal stores, whose instance keeps it in its data directory.
   */
  readonly shared?: SharedSettings;
}

/** The tries of a login's account (from its address) and of its address, in the window of the failed-login limit. */
export interface LoginTryCounts {
  account: TryCount;
  address: TryCount;
}

/** Failures, the time of the oldest (Infinity without one), and tries still being checked. */
export interface TryCount {
  failures: number;
  oldest: number;
  pending: number;
}

/** What every instance of a deployment shares besides the users (api.md "Sessions", "Access control and limits"). */
export interface SharedSettings {
  /** The signing secrets, the first signs; `make` makes the first one when there is none yet. */
  secrets(make: () => string): Promise<string[]>;
  /** Replaces the signing secrets (rotation), the first signs. */
  replaceSecrets(secrets: readonly string[]): Promise<void>;
  /** The generated admin password; `make` makes it when there is none yet. */
  generatedAdminPassword(make: () => string): Promise<{ password: string; created: boolean }>;
  /**
   * Replaces the built-in admin's identity (security/admin-identity.ts) with what `update` makes of the kept one, in
   * one step; returns it.
   */
  updateAdminIdentity(update: (kept: string | undefined) => string): Promise<string>;
  /**
   * The accounts (the admin among them once its password was changed), one serialized record each
   * (security/accounts-file.ts's line format).
   */
  accountRecords(): Promise<string[]>;
  /** Changes the accounts in one step: `update` edits the records by name. */
  updateAccountRecords(update: (records: Map<string, string>) => void): Promise<void>;
  /**
   * The failed-login limit across instances: counts the tries since `since`
   * of `address` and of `key` (that address and an account), one try of an
   * address at a time over every instance, and unless `refuse` answers a
   * refusal for those counts, records a try at `now` being checked: its slot.
   */
  takeLoginSlot<R>(
    address: string,
    key: string,
    since: number,
    now: number,
    refuse: (counts: LoginTryCounts) => R | undefined,
  ): Promise<{ refused: R } | { slot: string }>;
  /**
   * What the try of a slot came to: a failure; a success, which forgets the failures of its key too; or nothing
   * (released).
   */
  settleLoginSlot(slot: string, key: string, outcome: 'failed' | 'succeeded' | 'released'): Promise<void>;
  /**
   * Announces a serving instance to others (and to `copy`) until the answer's `close`; refreshed every
   * INSTANCE_BEAT_MS.
   */
  announce(instance: InstanceInfo): Promise<{ close(): Promise<void> }>;
  /** The instances that announced themselves and gave a sign of life within INSTANCE_GONE_MS. */
  liveInstances(): Promise<LiveInstance[]>;
}

/** What an instance says of itself to the others. */
export interface InstanceInfo {
  readonly host: string;
  readonly pid: number;
  readonly url: string;
}

export interface LiveInstance extends InstanceInfo {
  /** Milliseconds since its last sign of life. */
  readonly silentMs: number;
}

/** How often a serving instance refreshes its sign of life. */
export const INSTANCE_BEAT_MS = 2000;
/** An instance silent this long is taken as gone (killed without a stop). */
export const INSTANCE_GONE_MS = 10_000;

export type Readiness = { readonly ready: true } | { readonly ready: false; readonly reason: string };

export interface StoreStats {
  readonly users: number;
  /** Reservations not yet expired. */
  readonly reservations: number;
  /** Bytes in the journals that no snapshot covers yet; 0 for the memory store. */
  readonly journalBytes: number;
  /** How long each batch's fdatasync took; never observed by the memory store. */
  readonly fsyncSeconds: Histogram;
  /** True while the journal's disk is full and writes are refused. */
  readonly diskFull?: boolean;
}

/** Calls `next` with the value now, or once the promise resolves. */
export function andThen<T, U>(value: MaybePromise<T>, next: (value: T) => MaybePromise<U>): MaybePromise<U> {
  return value instanceof Promise ? value.then(next) : next(value);
}
