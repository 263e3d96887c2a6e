import { hash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { NEW_USER_PATH, RESERVATIONS_PATH, USERS_PATH, userPath } from '../../../shared/endpoints.js';
import { problems, type ProblemKind } from '../../../shared/problems.js';
import { MERGE_PATCH_TYPE } from '../../../shared/merge-patch.js';
import { MAX_DEPTH, parseRef, UserValidationError, validateUserBody } from '../../../shared/user.js';
import { HttpError } from '../../errors.js';
import type { KeptAnswer, KeyedRequest } from '../../store/kept-answer.js';
import type { CreateOutcome, Created, Lookup, MaybePromise, PutOutcome, Reserved } from '../../store/store.js';
import { etagMatches } from '../../users/entity-tag.js';
import {
  etagOf,
  scopedKey,
  type IdempotentOperation,
  type Preconditions,
  type Refusal,
  type RefusalKind,
  type StoredUser,
  type UserBody,
  type UserRef,
  type WritePolicy,
} from '../../users/rules.js';
import { aliasMap, DEFAULT_PAGE, flagParam, integerParam, MAX_PAGE } from '../listing.js';
import { QueryParams } from '../query-params.js';
import { isFormEncoding, isJsonType, isUtf8Type } from '../media-type.js';
import { empty, json, NEEDS_SESSION, NEEDS_SESSION_TO_READ, parameter, schema, SESSION_OPTIONAL } from '../openapi.js';
import { header, jsonText, parseJson, parseJsonText, preferredReturn, readBody, readBodyThen } from '../request.js';
import { notFound, sendEmpty, sendEmptyFields, sendJson, sendJsonFields, sendJsonWith } from '../response.js';
import type { Context, Route, RouteDeps } from '../route.js';
import { FIND_DESCRIPTION, FIND_PARAMETERS, findUsers, isFindQuery } from './find-users.js';

// RFC 9110 section 5.6.2 visible ASCII (VCHAR), 1..255 of them.
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/** The problem each refusal of the rules is answered with. */
const REFUSALS: Record<RefusalKind, ProblemKind> = {
  'not-found': problems.notFound,
  gone: problems.gone,
  'id-conflict': problems.idConflict,
  'precondition-failed': problems.preconditionFailed,
  'precondition-required': problems.preconditionRequired,
  'ids-exhausted': problems.idSpaceExhausted,
  'too-many-reservations': problems.tooManyReservations,
  'idempotency-key-reused': problems.idempotencyKeyReused,
  'invalid-user': problems.invalidUser,
  'schema-violation': problems.invalidUser,
  'unique-violation': problems.uniqueViolation,
};

function refusalError(refusal: Refusal): HttpError {
  if (refusal.kind === 'unique-violation')
    return new HttpError(
      problems.uniqueViolation,
      refusal.detail,
      {},
      { field: refusal.field, conflictsWith: userPath(refusal.conflictsWith) },
    );
  if (refusal.kind === 'schema-violation')
    return new HttpError(
      problems.invalidUser,
      refusal.detail,
      {},
      {
        field: refusal.field,
        keyword: refusal.keyword,
        errors: refusal.errors.map(({ field, keyword, detail }) => ({ field, keyword, detail })),
      },
    );
  return new HttpError(
    REFUSALS[refusal.kind],
    refusal.detail,
    refusal.retryAfter === undefined ? {} : { 'Retry-After': String(refusal.retryAfter) },
    refusal.field === undefined ? {} : { field: refusal.field },
  );
}

/** Every endpoint under /users and /reservations: HTTP in, store operations out. */
export function userRoutes(deps: RouteDeps): Route[] {
  const routes = new UserRoutes(deps);
  return [
    { method: 'GET', path: USERS_PATH, handler: (ctx) => routes.list(ctx), doc: LIST_DOC },
    { method: 'POST', path: NEW_USER_PATH, handler: (ctx) => routes.create(ctx), doc: CREATE_DOC },
    { method: 'GET', path: `${USERS_PATH}/:ref`, handler: (ctx) => routes.get(ctx, refOf(ctx)), doc: GET_DOC },
    { method: 'PUT', path: `${USERS_PATH}/:ref`, handler: (ctx) => routes.put(ctx, refOf(ctx)), doc: PUT_DOC },
    { method: 'PATCH', path: `${USERS_PATH}/:ref`, handler: (ctx) => routes.patch(ctx, refOf(ctx)), doc: PATCH_DOC },
    { method: 'DELETE', path: `${USERS_PATH}/:ref`, handler: (ctx) => routes.delete(ctx, refOf(ctx)), doc: DELETE_DOC },
    { method: 'POST', path: RESERVATIONS_PATH, handler: (ctx) => routes.reserve(ctx), doc: RESERVE_DOC },
  ];
}

class UserRoutes {
  private readonly store: RouteDeps['store'];
  private readonly config: RouteDeps['config'];
  private readonly access: RouteDeps['access'];
  private readonly policy: WritePolicy;
  /** Idempotency keys whose first request is still being served by this instance. */
  private readonly inProgress = new Set<string>();

  constructor(deps: RouteDeps) {
    this.store = deps.store;
    this.config = deps.config;
    this.access = deps.access;
    this.policy = { allowIdChange: deps.config.allowIdChange, requireIfMatch: deps.config.requireIfMatch };
  }

  /**
   * GET and HEAD of one user: the hot path. With nothing waiting to be made
   * durable the store answers at once and so does this: no promise is made.
   * An old id answers 301 before anything else, the session check after it.
   */
  get(ctx: Context, ref: UserRef): void | Promise<void> {
    const found = this.store.findUser(ref);
    if (found instanceof Promise) return found.then((f) => this.answerLookup(ctx, ref, f));
    return this.answerLookup(ctx, ref, found);
  }

  private answerLookup(ctx: Context, ref: UserRef, found: Lookup): void | Promise<void> {
    if (found !== undefined && 'kind' in found) return sendMoved(ctx, found.currentId);
    const authorized = this.access.authorize(ctx, 'read');
    if (authorized instanceof Promise) return authorized.then(() => sendUser(ctx, ref, found));
    sendUser(ctx, ref, found);
  }

  put(ctx: Context, target: UserRef): void | Promise<void> {
    const ref = this.writeTarget(ctx, target);
    return ref instanceof Promise ? ref.then((r) => this.putTo(ctx, r)) : this.putTo(ctx, ref);
  }

  /** The PUT once its target is known: the body, the store's decision, the answer. */
  private putTo(ctx: Context, ref: UserRef | undefined): void {
    if (ref === undefined) return;
    requireJson(ctx.req.headers['content-type']);
    const write = (text: string) =>
      this.store.putUser({
        ref,
        body: checkUser(parseJsonText(text)),
        preconditions: preconditionsOf(ctx),
        policy: this.policy,
        now: ctx.now,
      });
    writeFromBody(ctx, this.config.maxBody, write, answerPut);
  }

  /**
   * PATCH: a JSON merge patch (RFC 7396) merged into the user inside the store's write, and the result answered as a
   * PUT's.
   */
  patch(ctx: Context, target: UserRef): void | Promise<void> {
    const ref = this.writeTarget(ctx, target);
    return ref instanceof Promise ? ref.then((r) => this.patchTo(ctx, r)) : this.patchTo(ctx, ref);
  }

  private patchTo(ctx: Context, ref: UserRef | undefined): void {
    if (ref === undefined) return;
    requireMergePatch(ctx.req.headers['content-type']);
    const write = (text: string) =>
      this.store.putUser({
        ref,
        body: checkPatch(parseJsonText(text)),
        merge: true,
        preconditions: preconditionsOf(ctx),
        policy: this.policy,
        now: ctx.now,
      });
    writeFromBody(ctx, this.config.maxBody, write, answerPatch);
  }

  async delete(ctx: Context, target: UserRef): Promise<void> {
    const ref = await this.writeTarget(ctx, target);
    if (ref === undefined) return;
    const outcome = await this.store.deleteUser({ ref, preconditions: preconditionsOf(ctx), policy: this.policy });
    if (outcome.kind === 'deleted') return sendDeleted(ctx, outcome.user);
    if (outcome.kind === 'old-id') return sendMoved(ctx, outcome.currentId);
    throw refusalError(outcome);
  }

  /**
   * The reference of a PUT or DELETE, once its session may write; undefined
   * when an old id was answered with 301 (before anything else).
   */
  private writeTarget(ctx: Context, ref: UserRef): MaybePromise<UserRef | undefined> {
    const moved = this.answeredMove(ctx, ref);
    if (moved instanceof Promise) return moved.then((m) => (m ? undefined : this.mayWrite(ctx, ref)));
    return moved ? undefined : this.mayWrite(ctx, ref);
  }

  /** `ref` once the request's session or token may write (else the refusal is thrown). */
  private mayWrite(ctx: Context, ref: UserRef): MaybePromise<UserRef> {
    const authorized = this.access.authorize(ctx, 'write');
    return authorized === undefined ? ref : authorized.then(() => ref);
  }

  /**
   * Id-change variant: any request to an old id answers 301 to the current
   * one, before anything else. True when it did. No promise while the store
   * answers at once (a PUT makes few enough as it is).
   */
  private answeredMove(ctx: Context, ref: UserRef): boolean | Promise<boolean> {
    if (ref.kind !== 'id') return false;
    const moved = this.store.movedTo(ref.id);
    if (moved instanceof Promise) return moved.then((currentId) => redirected(ctx, currentId));
    return redirected(ctx, moved);
  }

  /** GET /users: the listing by id, or a find. No promise when the session check and the store answer at once. */
  list(ctx: Context): void | Promise<void> {
    const authorized = this.access.authorize(ctx, 'read');
    if (authorized instanceof Promise) return authorized.then(() => this.listFor(ctx));
    return this.listFor(ctx);
  }

  private listFor(ctx: Context): void | Promise<void> {
    const params = new QueryParams(ctx.query);
    if (isFindQuery(params)) return findUsers(ctx, this.store, params);
    return this.listById(ctx, params);
  }

  private async listById(ctx: Context, params: QueryParams): Promise<void> {
    const limit = integerParam(params, 'limit', DEFAULT_PAGE, 1, MAX_PAGE);
    const after = integerParam(params, 'after', 0, 0, Number.MAX_SAFE_INTEGER);
    const withAliases = flagParam(params, 'aliases');
    const page = await this.store.listUsers(after, limit);
    const query = `after=${page.next}&limit=${limit}${withAliases ? '&aliases=true' : ''}`;
    const next = page.next === undefined ? 'null' : JSON.stringify(`${USERS_PATH}?${query}`);
    const aliases = withAliases ? `,"aliases":${aliasMap(page)}` : '';
    sendJson(ctx.res, 200, `{"items":[${page.items.join(',')}]${aliases},"next":${next}}`);
  }

  async create(ctx: Context): Promise<void> {
    await this.access.authorize(ctx, 'write');
    requireJson(ctx.req.headers['content-type']);
    await this.createOnce(ctx, 'create-user', createdAnswer, async (raw, idempotency) => {
      // A body that does not parse is refused only if the key has no kept
      // answer: a different body under a used key is 422, whatever it holds.
      let body: UserBody | undefined;
      let invalid: unknown;
      try {
        body = checkUser(parseJson(raw));
      } catch (error) {
        invalid = error;
      }
      const outcome = await this.store.createUser({ body, idempotency, now: ctx.now });
      if (outcome.kind === 'invalid-body') throw invalid;
      return outcome;
    });
  }

  async reserve(ctx: Context): Promise<void> {
    await this.access.authorize(ctx, 'write');
    refuseFormBody(ctx.req.headers['content-type']);
    const { reservationTtl, maxReservations } = this.config;
    await this.createOnce(ctx, 'reserve-id', reservationAnswer, (_raw, idempotency) =>
      this.store.reserveId({ idempotency, now: ctx.now, ttlMs: reservationTtl * 1000, max: maxReservations }),
    );
  }

  /**
   * Runs a POST create under its Idempotency-Key, if any. The store keeps
   * the first answer for 24 hours and replays it for the same key and body;
   * the same key with another body is 422. While the first request is still
   * being served here, the same key is 409 (on another instance the store's
   * own atomic check decides).
   */
  private async createOnce<Done extends Created | Reserved>(
    ctx: Context,
    operation: IdempotentOperation,
    answerOf: (outcome: Done) => KeptAnswer,
    run: (raw: Buffer, key: KeyedRequest<Done> | undefined) => MaybePromise<Done | Exclude<CreateOutcome, Created>>,
  ): Promise<void> {
    const key = header(ctx.req, 'idempotency-key');
    if (key === undefined) {
      sendOutcome(ctx.res, await run(await readBody(ctx.req, this.config.maxBody), undefined), answerOf);
      return;
    }
    if (!IDEMPOTENCY_KEY.test(key))
      throw new HttpError(problems.invalidHeader, 'Idempotency-Key must be 1 to 255 visible ASCII characters.');
    const scoped = scopedKey(operation, key);
    if (this.inProgress.has(scoped))
      throw new HttpError(
        problems.idempotencyInProgress,
        'A request with this Idempotency-Key is still in progress; retry later.',
        { 'Retry-After': '1' },
      );
    this.inProgress.add(scoped);
    try {
      const raw = await readBody(ctx.req, this.config.maxBody);
      const fingerprint = hash('sha256', raw, 'base64url');
      sendOutcome(ctx.res, await run(raw, { key, fingerprint, answerOf }), answerOf);
    } finally {
      this.inProgress.delete(scoped);
    }
  }
}

/** The answer to a PUT the store decided: the user written, a 301 to its current id, or the refusal thrown. */
function answerPut(ctx: Context, outcome: PutOutcome, text: string): void {
  switch (outcome.kind) {
    case 'created':
      return sendWritten(ctx, 201, outcome.user, text, true);
    case 'replaced':
      return sendWritten(ctx, 200, outcome.user, text, false);
    case 'moved':
      return sendWritten(ctx, 200, outcome.user, text, true);
    case 'old-id':
      return sendMoved(ctx, outcome.currentId);
    default:
      throw refusalError(outcome);
  }
}

/**
 * The answer to a PATCH: a PUT's, without a validator (the patch is not the
 * stored representation, as RFC 9110 section 9.3.4 asks of a PUT's): the
 * next GET gives the ETag.
 */
function answerPatch(ctx: Context, outcome: PutOutcome, patch: string): void {
  answerPut(ctx, outcome, patch);
}

/**
 * A write from the request's body, on callbacks with no promise of its own
 * (each would cost the hottest write a promise, a reaction and a
 * microtask): `write` gets the body as JSON text once it is read, `answer`
 * the outcome once the store gives it; what any step throws is answered
 * through `ctx.fail`.
 */
function writeFromBody<T>(
  ctx: Context,
  limit: number,
  write: (text: string) => MaybePromise<T>,
  answer: (ctx: Context, outcome: T, text: string) => void,
): void {
  const failed = (error: unknown) => ctx.fail(error);
  const written = (text: string) => {
    let outcome: MaybePromise<T>;
    try {
      outcome = write(text);
    } catch (error) {
      return failed(error);
    }
    if (outcome instanceof Promise) outcome.then((settled) => answerOrFail(ctx, answer, settled, text), failed);
    else answerOrFail(ctx, answer, outcome, text);
  };
  readBodyThen(ctx.req, limit, jsonText, written, failed);
}

function answerOrFail<T>(
  ctx: Context,
  answer: (ctx: Context, outcome: T, text: string) => void,
  outcome: T,
  text: string,
): void {
  try {
    answer(ctx, outcome, text);
  } catch (error) {
    ctx.fail(error);
  }
}

/** Answers 301 when the user moved to `currentId`; true when it did. */
function redirected(ctx: Context, currentId: number | undefined): boolean {
  if (currentId === undefined) return false;
  sendMoved(ctx, currentId);
  return true;
}

/** 301 to the current id of a user that moved from the id asked for (the id-change variant). */
function sendMoved(ctx: Context, currentId: number): void {
  sendEmpty(ctx.res, 301, { Location: userPath(currentId) });
}

/** Parses the `{ref}` segment: 400 for a malformed one, 404 for a non-canonical id. */
function refOf(ctx: Context): UserRef {
  const ref = parseRef(ctx.params.ref!);
  if (ref.kind === 'invalid') throw new HttpError(problems.invalidRef, `Malformed user reference: ${ref.reason}.`);
  if (ref.kind === 'no-such-id') throw notFound('No user has this id: ids are canonical decimal safe integers.');
  return ref;
}

function sendUser(ctx: Context, ref: UserRef, user: StoredUser | undefined): void {
  if (user === undefined) throw notFound('No such user.');
  const etag = etagOf(user);
  const ifNoneMatch = ctx.req.headers['if-none-match'];
  if (ifNoneMatch !== undefined && etagMatches(ifNoneMatch, etag, true)) {
    return sendEmpty(
      ctx.res,
      304,
      ref.kind === 'alias' ? { ETag: etag, 'Content-Location': userPath(user.id) } : { ETag: etag },
    );
  }
  if (ref.kind === 'alias')
    return sendJsonFields(ctx.res, 200, user.json, ['ETag', etag, 'Content-Location', userPath(user.id)]);
  sendJsonWith(ctx.res, 200, user.json, 'ETag', etag);
}

function preconditionsOf(ctx: Context): Preconditions {
  return { ifMatch: ctx.req.headers['if-match'], ifNoneMatch: ctx.req.headers['if-none-match'] };
}

/**
 * Sends a user after a write: 201/200 (with Location when it was created or moved), or 204 for Prefer: return=minimal.
 */
function sendWritten(ctx: Context, status: 200 | 201, user: StoredUser, text: string, withLocation: boolean): void {
  const path = userPath(user.id);
  // Header lists, not objects: the hot path of a PUT builds no object to spread.
  const fields = withLocation ? ['Location', path] : [];
  const minimal = preferredReturn(header(ctx.req, 'prefer')) === 'minimal';
  if (!minimal) fields.push('Content-Location', path);
  // RFC 9110 section 9.3.4: a validator only when the stored representation
  // is exactly the content received (as UTF-8 text: the same text is the same bytes).
  if (text === user.json) fields.push('ETag', etagOf(user));
  if (!minimal) return sendJsonFields(ctx.res, status, user.json, fields);
  fields.push('Preference-Applied', 'return=minimal');
  sendEmptyFields(ctx.res, 204, fields);
}

/**
 * 204 after a delete; with `Prefer: return=representation`, 200 and the
 * user as it was (RFC 9110 section 9.3.5), so that a client keeps what it
 * deleted.
 */
function sendDeleted(ctx: Context, user: StoredUser): void {
  if (preferredReturn(header(ctx.req, 'prefer')) !== 'representation') return sendEmpty(ctx.res, 204);
  sendJson(ctx.res, 200, user.json, { 'Preference-Applied': 'return=representation' });
}

/** The answer to a POST create: the 201 of `answerOf` (kept under its key, if any), a replay, or the refusal thrown. */
function sendOutcome<Done extends Created | Reserved>(
  res: ServerResponse,
  outcome: Done | Exclude<CreateOutcome, Created>,
  answerOf: (outcome: Done) => KeptAnswer,
): void {
  switch (outcome.kind) {
    case 'created':
    case 'reserved':
      return sendAnswer(res, answerOf(outcome), false);
    case 'replayed':
      return sendAnswer(res, outcome.answer, true);
    case 'invalid-body':
      throw new Error('an invalid body reached sendOutcome');
    default:
      throw refusalError(outcome);
  }
}

/** The 201 to POST /users/new: the user as stored, at its new address. */
function createdAnswer(created: Created): KeptAnswer {
  return { status: 201, body: created.user.json, location: userPath(created.user.id) };
}

/** The 201 to POST /reservations: the id and when its hold ends. */
function reservationAnswer(reserved: Reserved): KeptAnswer {
  return {
    status: 201,
    body: JSON.stringify({ id: reserved.id, expiresAt: new Date(reserved.expiresAt).toISOString() }),
    location: userPath(reserved.id),
  };
}

function sendAnswer(res: ServerResponse, answer: KeptAnswer, replayed: boolean): void {
  const headers: Record<string, string> = { Location: answer.location ?? '' };
  if (replayed) headers['Idempotent-Replayed'] = 'true';
  sendJson(res, answer.status, answer.body, headers);
}

/** PUT rule 1: the body must be application/json or a +json type, else 415. */
function requireJson(contentType: string | undefined): void {
  if (!isJsonType(contentType))
    throw new HttpError(problems.unsupportedMediaType, 'Send the user as Content-Type: application/json (UTF-8).');
}

/** PATCH takes a JSON merge patch only; any other type is 415 with Accept-Patch (RFC 5789 section 2.2). */
function requireMergePatch(contentType: string | undefined): void {
  if (!isUtf8Type(contentType, MERGE_PATCH_TYPE))
    throw new HttpError(
      problems.unsupportedMediaType,
      `Send the change as Content-Type: ${MERGE_PATCH_TYPE} (a JSON merge patch, RFC 7396, in UTF-8).`,
      { 'Accept-Patch': MERGE_PATCH_TYPE },
    );
}

/**
 * A merge patch for a user: a JSON object (any other patch replaces the
 * whole user with a non-object), nested no deeper than a user may be, so
 * that merging it is bounded.
 */
function checkPatch(value: unknown): UserBody {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new HttpError(problems.invalidUser, 'A merge patch of a user must be a JSON object.', {}, { field: '' });
  if (!nestedAtMost(value, MAX_DEPTH))
    throw new HttpError(
      problems.invalidUser,
      `The patch is nested deeper than ${MAX_DEPTH} levels.`,
      {},
      { field: '' },
    );
  return value as UserBody;
}

/** True when objects and arrays in `value` nest no deeper than `max`; iterative, so any depth is safe to ask about. */
function nestedAtMost(value: unknown, max: number): boolean {
  // The usual patch is flat: its members are checked without a stack.
  if (Object.values(value as object).every((member) => typeof member !== 'object' || member === null)) return true;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (typeof item !== 'object' || item === null) continue;
    if (depth > max) return false;
    for (const member of Object.values(item)) stack.push([member, depth + 1]);
  }
  return true;
}

/**
 * POST /reservations ignores its body, so on its own a cross-site form
 * posting to it with the user's cookie would reserve an id. A body labelled
 * as form content is refused (415), as it is on every other write.
 */
function refuseFormBody(contentType: string | undefined): void {
  if (isFormEncoding(contentType))
    throw new HttpError(
      problems.unsupportedMediaType,
      'POST /reservations takes no form content: send no body, or application/json.',
    );
}

function checkUser(value: unknown): UserBody {
  try {
    return validateUserBody(value);
  } catch (error) {
    if (!(error instanceof UserValidationError)) throw error;
    throw new HttpError(
      problems.invalidUser,
      error.message + (error.field ? ` (field "${error.field}").` : '.'),
      {},
      { field: error.field },
    );
  }
}

// ------------------------------------------------------------ OpenAPI

const MOVED = empty('The id belonged to a user that moved (`--allow-id-change`).', 'Location');

/** What a write meets on a unique declared field. */
const UNIQUE_NOTE =
  'A value another user holds at a field declared unique (`GET /indexes`): 409 `unique-violation`, with `field` and `conflictsWith`, the URI of that user.';

const LIST_DOC = {
  operationId: 'listUsers',
  summary: 'List users in ascending id order, or find them',
  description: `${FIND_DESCRIPTION} Unknown query parameters are ignored. ${NEEDS_SESSION_TO_READ}`,
  tags: ['users'],
  security: SESSION_OPTIONAL,
  parameters: [parameter('limit'), parameter('after'), parameter('aliases'), ...FIND_PARAMETERS],
  responses: { '200': json('A page of users.', schema('UserPage')) },
  problems: [401],
};

const CREATE_DOC = {
  operationId: 'createUser',
  summary: 'Create a user with the next id',
  description: `Not idempotent, unless \`Idempotency-Key\` is sent: then the first successful response is kept for 24 hours and replayed for the same key and body. ${UNIQUE_NOTE} ${NEEDS_SESSION}`,
  tags: ['users'],
  security: SESSION_OPTIONAL,
  parameters: [parameter('Idempotency-Key')],
  requestBody: {
    required: true,
    description: 'The user, without `id`.',
    content: { 'application/json': { schema: schema('User') } },
  },
  responses: { '201': json('Created; `Location` names the user.', schema('User'), 'Location', 'Idempotent-Replayed') },
  problems: [401, 403, 409, 413, 415, 422, 503],
};

const GET_DOC = {
  operationId: 'getUser',
  summary: 'Read a user by id or alias',
  description: NEEDS_SESSION_TO_READ,
  tags: ['users'],
  security: SESSION_OPTIONAL,
  parameters: [parameter('ref'), parameter('If-None-Match')],
  responses: {
    '200': json('The stored representation.', schema('User'), 'ETag', 'Content-Location'),
    '301': MOVED,
    '304': empty('`If-None-Match` matches the current `ETag`.', 'ETag', 'Content-Location'),
  },
  problems: [401, 404],
};

const PUT_DOC = {
  operationId: 'putUser',
  summary: 'Create or replace a user',
  description: `Replaces an existing user (200), creates one through an unbound alias (201) or under a live reservation (201). With \`Prefer: return=minimal\`: 204. ${UNIQUE_NOTE} ${NEEDS_SESSION}`,
  tags: ['users'],
  security: SESSION_OPTIONAL,
  parameters: [parameter('ref'), parameter('If-Match'), parameter('If-None-Match'), parameter('Prefer')],
  requestBody: {
    required: true,
    description: "The whole user; `id`, if present, must be the target's.",
    content: { 'application/json': { schema: schema('User') } },
  },
  responses: {
    '200': json(
      'Replaced (or moved, under `--allow-id-change`).',
      schema('User'),
      'Content-Location',
      'ETag',
      'Location',
    ),
    '201': json('Created; `Location` names the user.', schema('User'), 'Location', 'Content-Location', 'ETag'),
    '204': empty('Written, with `Prefer: return=minimal`.', 'Preference-Applied', 'Location'),
    '301': MOVED,
  },
  problems: [401, 403, 404, 409, 410, 412, 413, 415, 422, 428, 503],
};

const PATCH_DOC = {
  operationId: 'patchUser',
  summary: 'Change some fields of a user (JSON merge patch)',
  description: `Merges the patch into the user (RFC 7396: \`null\` removes a member, objects merge, anything else replaces) and checks the result as a PUT body; never creates (404). Idempotent. With \`Prefer: return=minimal\`: 204. ${NEEDS_SESSION}`,
  tags: ['users'],
  security: SESSION_OPTIONAL,
  parameters: [parameter('ref'), parameter('If-Match'), parameter('Prefer')],
  requestBody: {
    required: true,
    description: 'A JSON merge patch of the user; an `id` in it follows the PUT rules.',
    content: { [MERGE_PATCH_TYPE]: { schema: { type: 'object' } } },
  },
  responses: {
    '200': json('Patched: the user as it now is.', schema('User'), 'Content-Location', 'Location'),
    '204': empty('Patched, with `Prefer: return=minimal`.', 'Preference-Applied'),
    '301': MOVED,
  },
  problems: [401, 403, 404, 409, 412, 413, 415, 422, 428, 503],
};

const DELETE_DOC = {
  operationId: 'deleteUser',
  summary: 'Delete a user; its id is retired, its alias released',
  description: NEEDS_SESSION,
  tags: ['users'],
  security: SESSION_OPTIONAL,
  parameters: [parameter('ref'), parameter('If-Match'), parameter('Prefer')],
  responses: {
    '200': json(
      'Deleted, with `Prefer: return=representation`: the user as it was.',
      schema('User'),
      'Preference-Applied',
    ),
    '204': empty('Deleted.'),
    '301': MOVED,
  },
  problems: [401, 403, 404, 412, 428],
};

const RESERVE_DOC = {
  operationId: 'reserveId',
  summary: 'Reserve the next id for --reservation-ttl seconds',
  description: `The request body is ignored, but counts against \`--max-body\` and in the \`Idempotency-Key\` fingerprint; form content (\`application/x-www-form-urlencoded\`, \`multipart/form-data\`, \`text/plain\`) is refused with 415, so a cross-site form cannot reserve ids. ${NEEDS_SESSION}`,
  tags: ['users'],
  security: SESSION_OPTIONAL,
  parameters: [parameter('Idempotency-Key')],
  responses: {
    '201': json(
      'Reserved; `Location` names the id to PUT to.',
      schema('Reservation'),
      'Location',
      'Idempotent-Replayed',
    ),
  },
  problems: [401, 403, 409, 413, 415, 422, 503],
};
