/**
 * The rules of the user resource (API.md "PUT rules", "Reservations and
 * Idempotency-Key", the id-change variant), as pure decisions over the
 * facts a store holds. They know nothing of HTTP: a decision is a typed
 * outcome that the HTTP layer maps to a status. A store gathers the facts
 * and applies the decision in one atomic step (a synchronous stretch in
 * memory, one transaction in a database), so no other write can come
 * between a check and its write.
 */
import { RESERVATIONS_PATH } from '../../shared/endpoints.js';
import { applyMergePatch } from '../../shared/merge-patch.js';
import { UserValidationError, validateUserBody, type Ref } from '../../shared/user.js';
import { entityTag, etagMatches, strongTags } from './entity-tag.js';
import type { SchemaRefusal, UserSchema } from './user-schema.js';

/** A well-formed reference: an id or an alias. */
export type UserRef = Extract<Ref, { kind: 'id' } | { kind: 'alias' }>;

/** One stored version of a user. */
export interface StoredUser {
  readonly id: number;
  /** The alias the user was created through, if any. */
  readonly alias: string | undefined;
  /** The representation, serialized once per stored version. */
  readonly json: string;
  /** Its entity tag, computed on first use (`etagOf`). */
  etag: string | undefined;
}

/** The strong entity tag of a stored version, computed once and kept with it. */
export function etagOf(user: StoredUser): string {
  return (user.etag ??= entityTag(user.json));
}

/** A user body that passed validation (shared/user.ts); it may carry an `id`. */
export type UserBody = Record<string, unknown>;

/** What a decision may look at: one consistent view of the store. */
export interface UserFacts {
  userById(id: number): StoredUser | undefined;
  userIdOfAlias(alias: string): number | undefined;
  /** The current id of a user that moved away from `id` (id-change variant). */
  movedTo(id: number): number | undefined;
  /** True when `id` was ever issued: assigned, reserved, or moved to. */
  isIssued(id: number): boolean;
  isReservationLive(id: number, now: number): boolean;
  /** The next id to issue in turn; undefined once the safe integers are used up. */
  nextId(): number | undefined;
  /** The schema of the users' fields every write must fit (users/user-schema.ts); undefined: none is set. */
  userSchema(): UserSchema | undefined;
}

/** Deployment choices that change the rules: `--allow-id-change`, `--require-if-match`. */
export interface WritePolicy {
  readonly allowIdChange: boolean;
  readonly requireIfMatch: boolean;
}

/** The conditional-request fields of a write, as sent (RFC 9110 section 13.1). */
export interface Preconditions {
  readonly ifMatch: string | undefined;
  readonly ifNoneMatch: string | undefined;
}

/** Every way a write or lookup is refused. */
export type RefusalKind =
  | 'not-found'
  | 'gone'
  | 'id-conflict'
  | 'precondition-failed'
  | 'precondition-required'
  | 'ids-exhausted'
  | 'too-many-reservations'
  | 'idempotency-key-reused'
  | 'invalid-user'
  | 'schema-violation'
  | 'unique-violation';

export type Refusal = GeneralRefusal | UniqueViolation | SchemaRefusal;

interface GeneralRefusal {
  readonly kind: Exclude<RefusalKind, 'unique-violation' | 'schema-violation'>;
  readonly detail: string;
  /** Seconds after which a retry can succeed, where that is known. */
  readonly retryAfter?: number;
  /** The member a refused body breaks (`invalid-user`). */
  readonly field?: string;
}

/** A write that would give a declared unique field a value another user holds (users/declared-fields.ts). */
export interface UniqueViolation {
  readonly kind: 'unique-violation';
  readonly detail: string;
  /** The declared path. */
  readonly field: string;
  /** The id of the user that holds the value. */
  readonly conflictsWith: number;
}

/** The reference is an old id of a user that moved: `currentId` is the user's id now. */
export interface OldId {
  readonly kind: 'old-id';
  readonly currentId: number;
}

function refuse(kind: GeneralRefusal['kind'], detail: string, retryAfter?: number): Refusal {
  return retryAfter === undefined ? { kind, detail } : { kind, detail, retryAfter };
}

export interface PutRequest {
  readonly ref: UserRef;
  /** The new representation; with `merge`, a JSON merge patch (RFC 7396) of the current one. */
  readonly body: UserBody;
  /** PATCH: `body` is merged into the user, which must exist. */
  readonly merge?: boolean;
  readonly preconditions: Preconditions;
  readonly policy: WritePolicy;
  readonly now: number;
}

type PutDecision =
  | { readonly kind: 'create'; readonly id: number; readonly alias: string | undefined; readonly json: string }
  | { readonly kind: 'replace'; readonly user: StoredUser; readonly json: string }
  /** A replace whose representation is the stored one byte for byte: nothing to write, and no change for the feed. */
  | { readonly kind: 'unchanged'; readonly user: StoredUser }
  | { readonly kind: 'move'; readonly user: StoredUser; readonly to: number; readonly json: string }
  | OldId
  | Refusal;

export interface DeleteRequest {
  readonly ref: UserRef;
  readonly preconditions: Preconditions;
  readonly policy: WritePolicy;
}

type DeleteDecision = { readonly kind: 'delete'; readonly user: StoredUser } | OldId | Refusal;

/**
 * The representation: the body as given, plus the id (kept in place when
 * the body carries it). Without one, the id is written after the body's
 * last member: a copy of the body would cost more than the serializing.
 */
function represent(body: UserBody, id: number): string {
  if (Object.hasOwn(body, 'id')) return JSON.stringify(body.id === id ? body : { ...body, id });
  const json = JSON.stringify(body);
  return `${json.slice(0, -1)}${json.length > 2 ? ',' : ''}"id":${id}}`;
}

interface Target {
  readonly id: number | undefined;
  readonly user: StoredUser | undefined;
  /** Set when the reference is an alias. */
  readonly alias: string | undefined;
}

/** The user a reference names, or the current id of an old one. */
function resolveRef(ref: UserRef, facts: UserFacts): Target | OldId {
  if (ref.kind === 'alias') {
    const id = facts.userIdOfAlias(ref.alias);
    return { id, user: id === undefined ? undefined : facts.userById(id), alias: ref.alias };
  }
  const currentId = facts.movedTo(ref.id);
  if (currentId !== undefined) return { kind: 'old-id', currentId };
  return { id: ref.id, user: facts.userById(ref.id), alias: undefined };
}

/** If-Match, If-None-Match and `--require-if-match` for a write on `user` (undefined: no user yet). */
function checkPreconditions(
  pre: Preconditions,
  user: StoredUser | undefined,
  policy: WritePolicy,
): Refusal | undefined {
  if (pre.ifMatch !== undefined && !etagMatches(pre.ifMatch, user && etagOf(user), false)) {
    return refuse(
      'precondition-failed',
      user ? 'If-Match does not match the current ETag.' : 'If-Match was given but the user does not exist.',
    );
  }
  if (pre.ifNoneMatch !== undefined && user !== undefined && etagMatches(pre.ifNoneMatch, etagOf(user), true)) {
    return refuse('precondition-failed', 'If-None-Match matches: the user exists.');
  }
  if (policy.requireIfMatch && user !== undefined && pre.ifMatch === undefined) {
    return refuse(
      'precondition-required',
      'This server requires If-Match on PUT and DELETE of an existing user: GET it for its ETag.',
    );
  }
  return undefined;
}

/** PUT rules 2 to 6 and the id-change variant. */
export function decidePut(request: PutRequest, facts: UserFacts): PutDecision {
  const target = resolveRef(request.ref, facts);
  if ('kind' in target) return target;
  if (request.merge === true) return decidePatch(request, target.user, facts);
  if (target.user !== undefined) return decideExisting(request, target.user, facts);
  const bodyId = request.body.id as number | undefined;
  let id: number;
  if (target.alias !== undefined) {
    // Rule 3: an alias that names nobody creates a user with a fresh id.
    const next = facts.nextId();
    if (next === undefined) return idsExhausted();
    id = next;
    if (bodyId !== undefined && bodyId !== id) {
      if (!request.policy.allowIdChange)
        return refuse(
          'id-conflict',
          'The body carries an id, but a user created through an alias gets its id from the server; leave "id" out, or start users-server with --allow-id-change to choose it.',
        );
      if (facts.isIssued(bodyId)) return refuse('id-conflict', `The id ${bodyId} has already been issued.`);
      id = bodyId;
    }
  } else {
    // Rule 4: an id that names nobody is created only under a live reservation.
    id = target.id!;
    if (!facts.isReservationLive(id, request.now)) {
      if (facts.isIssued(id))
        return refuse(
          'gone',
          `The id ${id} was issued, but its reservation expired or its user was deleted; reserve a new id.`,
        );
      return refuse(
        'not-found',
        `The id ${id} was never issued: reserve one with POST ${RESERVATIONS_PATH}, or PUT under an alias.`,
      );
    }
  }
  // RFC 9110 section 13.2.1: preconditions are evaluated only where the
  // answer without them would be a success, so after not-found and gone.
  const refusal = checkPreconditions(request.preconditions, undefined, request.policy);
  if (refusal !== undefined) return refusal;
  if (bodyId !== undefined && bodyId !== id && target.alias === undefined) {
    return refuse('id-conflict', `The body says id ${bodyId} but the reserved id is ${id}.`);
  }
  return (
    breaksSchema(request.body, id, facts) ?? {
      kind: 'create',
      id,
      alias: target.alias,
      json: represent(request.body, id),
    }
  );
}

/**
 * A PUT by id that can only be a replace (rule 2) if a user lives at that
 * id: its new version, and the tags the current one must have. A store may
 * try it as one conditional write (`update ... where id = ... and etag in
 * ...`) and decide with `decidePut` only when no row matched; undefined
 * when the PUT could be something else (a create, a move, If-None-Match).
 */
export interface DirectReplace {
  readonly id: number;
  readonly json: string;
  readonly etag: string;
  /** The current version's tag must be one of these; undefined: any version. */
  readonly ifMatch: readonly string[] | undefined;
}

export function directReplace(request: PutRequest, schema: UserSchema | undefined): DirectReplace | undefined {
  const { ref, body, preconditions: pre, policy } = request;
  if (
    request.merge === true ||
    ref.kind !== 'id' ||
    pre.ifNoneMatch !== undefined ||
    (body.id !== undefined && body.id !== ref.id)
  )
    return undefined;
  // A body that breaks the schema is refused, or answered 404 or 412 first, by the general way.
  if (schema !== undefined && schema.refusalAs(body, ref.id) !== undefined) return undefined;
  if (policy.requireIfMatch && pre.ifMatch === undefined) return undefined;
  const ifMatch = pre.ifMatch === undefined || pre.ifMatch.trim() === '*' ? undefined : strongTags(pre.ifMatch);
  if (ifMatch?.length === 0) return undefined;
  const json = represent(body, ref.id);
  return { id: ref.id, json, etag: entityTag(json), ifMatch };
}

/**
 * PATCH: the patch merged into the current representation, then decided as
 * the PUT of the result. A PATCH never creates; its preconditions are
 * checked before the result is, as a PUT's are before its body's id.
 */
function decidePatch(request: PutRequest, user: StoredUser | undefined, facts: UserFacts): PutDecision {
  if (user === undefined) return refuse('not-found', 'No such user; a PATCH changes a user, it never creates one.');
  const refusal = checkPreconditions(request.preconditions, user, request.policy);
  if (refusal !== undefined) return refusal;
  const merged = mergedUser(user, request.body);
  return merged.kind === 'merged'
    ? decideExisting({ ...request, body: merged.body, merge: false }, user, facts)
    : merged;
}

/** The current representation of `user` with `patch` merged in, checked as a PUT body is. */
function mergedUser(user: StoredUser, patch: UserBody): { readonly kind: 'merged'; readonly body: UserBody } | Refusal {
  try {
    return { kind: 'merged', body: validateUserBody(applyMergePatch(JSON.parse(user.json), patch)) };
  } catch (error) {
    if (!(error instanceof UserValidationError)) throw error;
    const detail = `The patched user is not valid: ${error.message}${error.field ? ` (field "${error.field}").` : '.'}`;
    return { kind: 'invalid-user', detail, field: error.field };
  }
}

/** Rule 2 (replace), rule 5 (the body's id) and the id-change variant's move. */
function decideExisting(request: PutRequest, user: StoredUser, facts: UserFacts): PutDecision {
  const refusal = checkPreconditions(request.preconditions, user, request.policy);
  if (refusal !== undefined) return refusal;
  const bodyId = request.body.id as number | undefined;
  if (bodyId === undefined || bodyId === user.id) {
    const broken = breaksSchema(request.body, user.id, facts);
    if (broken !== undefined) return broken;
    const json = represent(request.body, user.id);
    return json === user.json ? { kind: 'unchanged', user } : { kind: 'replace', user, json };
  }
  if (!request.policy.allowIdChange)
    return refuse(
      'id-conflict',
      `The body says id ${bodyId} but this user is ${user.id}; ids are assigned by the server. To move a user to a new id, start users-server with --allow-id-change.`,
    );
  if (facts.isIssued(bodyId))
    return refuse(
      'id-conflict',
      `The id ${bodyId} has already been issued; a user can only move to an id never issued before.`,
    );
  return (
    breaksSchema(request.body, bodyId, facts) ?? {
      kind: 'move',
      user,
      to: bodyId,
      json: represent(request.body, bodyId),
    }
  );
}

export function decideDelete(request: DeleteRequest, facts: UserFacts): DeleteDecision {
  const target = resolveRef(request.ref, facts);
  if ('kind' in target) return target;
  if (target.user === undefined) return refuse('not-found', 'No such user.');
  return (
    checkPreconditions(request.preconditions, target.user, request.policy) ?? { kind: 'delete', user: target.user }
  );
}

/** POST /users/new: a fresh id for a body without one. */
export function decideCreate(
  body: UserBody,
  facts: UserFacts,
): { readonly kind: 'create'; readonly id: number; readonly json: string } | Refusal {
  if (body.id !== undefined) return refuse('id-conflict', 'POST /users/new assigns the id; leave id out of the body.');
  const id = facts.nextId();
  if (id === undefined) return idsExhausted();
  return breaksSchema(body, id, facts) ?? { kind: 'create', id, json: represent(body, id) };
}

/**
 * The refusal of writing `body` as the user `id` when it breaks the
 * schema; checked after the other rules, so that a write they refuse
 * answers as it would without a schema.
 */
function breaksSchema(body: UserBody, id: number, facts: UserFacts): SchemaRefusal | undefined {
  return facts.userSchema()?.refusalAs(body, id);
}

function idsExhausted(): Refusal {
  return refuse('ids-exhausted', 'Every safe integer id has been issued.');
}

// ------------------------------------------------------------ reservations

/** The cap on live reservations is reached: retry when the earliest one expires. */
export function tooManyReservations(max: number, earliestExpiry: number, now: number): Refusal {
  const retryAfter = Math.max(1, Math.ceil((earliestExpiry - now) / 1000));
  return refuse('too-many-reservations', `There are ${max} live reservations; retry when one expires.`, retryAfter);
}

// ------------------------------------------------------------ idempotency

/** An Idempotency-Key sent with a create, and the fingerprint of the body it came with. */
export interface IdempotencyKey {
  readonly key: string;
  readonly fingerprint: string;
}

/** API.md: "the first response is kept for 24 h". */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/** The operations a key is scoped to: the same key on both is two keys. */
export type IdempotentOperation = 'create-user' | 'reserve-id';

/**
 * The prefix of each operation's keys as journals and databases store them:
 * fixed texts (they read as the operations' paths), so a kept key is found
 * again whatever the endpoints are called.
 */
const KEY_SCOPES: Readonly<Record<IdempotentOperation, string>> = {
  'create-user': '/users/new',
  'reserve-id': '/reservations',
};

/** The key as stored: prefixed with its operation's scope. */
export function scopedKey(operation: IdempotentOperation, key: string): string {
  return `${KEY_SCOPES[operation]} ${key}`;
}

/** A key seen before with a different body: its reuse is refused. */
export function keyReused(): Refusal {
  return refuse('idempotency-key-reused', 'This Idempotency-Key was used with a different request body.');
}
