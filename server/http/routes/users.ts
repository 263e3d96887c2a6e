import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { NEW_USER_PATH, RESERVATIONS_PATH, USERS_PATH, userPath } from '../../../shared/endpoints.js';
import { problems } from '../../../shared/problems.js';
import { parseRef, UserValidationError, validateUserBody } from '../../../shared/user.js';
import type { AppDeps } from '../app.js';
import { HttpError, notFound } from '../http-error.js';
import { etagMatches, header, isJsonContentType, parseJson, prefersMinimal, readBody, sendEmpty, sendJson } from '../response.js';
import type { Context, Route } from '../router.js';
import type { Sessions } from '../session-cookies.js';
import { firstIdAfter } from '../../store/memory/state.js';
import type { Mutation, UserRecord } from '../../store/store.js';

const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
const DEFAULT_PAGE = 100;
const MAX_PAGE = 1000;
// RFC 9110 section 5.6.2 visible ASCII (VCHAR), 1..255 of them.
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/** The strong entity tag of a stored version, computed once and kept with it. */
export function etagOf(user: UserRecord): string {
  return (user.etag ??= `"${createHash('sha256').update(user.json).digest('base64url').slice(0, 27)}"`);
}

/** The result of a create through POST: what an Idempotency-Key replays. */
interface Created {
  status: number;
  body: string;
  location: string;
  mutations: Mutation[];
}

/** Every endpoint under /users and /reservations. */
export function userRoutes(deps: AppDeps, sessions: Sessions): Route[] {
  const { store, config } = deps;
  const state = store.state;
  /** Idempotency keys whose first request is still being served. */
  const inProgress = new Set<string>();

  /** Parses the `{ref}` segment: 400 for a malformed one, 404 for a non-canonical id. */
  function refOf(ctx: Context) {
    const ref = parseRef(ctx.params.ref!);
    if (ref.kind === 'invalid') throw new HttpError(problems.invalidRef, `Malformed user reference: ${ref.reason}.`);
    if (ref.kind === 'no-such-id') throw notFound('No user has this id: ids are canonical decimal safe integers.');
    // Any request to an old id of a moved user answers 301, before anything else.
    const movedTo = ref.kind === 'id' ? state.moved.get(ref.id) : undefined;
    if (movedTo !== undefined) throw new Redirect(userPath(movedTo));
    return ref;
  }

  type Target = { id: number | undefined; user: UserRecord | undefined; byAlias: string | undefined };

  /** Finds the user a reference names. */
  function resolve(ref: ReturnType<typeof refOf>): Target {
    if (ref.kind === 'alias') {
      const id = state.aliases.get(ref.alias);
      return { id, user: id === undefined ? undefined : state.users.get(id), byAlias: ref.alias };
    }
    // A move during an await (reading the body) is seen here too.
    const movedTo = state.moved.get(ref.id);
    if (movedTo !== undefined) throw new Redirect(userPath(movedTo));
    return { id: ref.id, user: state.users.get(ref.id), byAlias: undefined };
  }

  /** Checks If-Match / If-None-Match / --require-if-match for a write on `user`. */
  function checkPreconditions(req: IncomingMessage, user: UserRecord | undefined): void {
    const ifMatch = req.headers['if-match'];
    const ifNoneMatch = req.headers['if-none-match'];
    if (ifMatch !== undefined && !etagMatches(ifMatch, user && etagOf(user), false)) {
      throw new HttpError(problems.preconditionFailed, user ? 'If-Match does not match the current ETag.' : 'If-Match was given but the user does not exist.');
    }
    if (ifNoneMatch !== undefined && user !== undefined && etagMatches(ifNoneMatch, etagOf(user), true)) {
      throw new HttpError(problems.preconditionFailed, 'If-None-Match matches: the user exists.');
    }
    if (config.requireIfMatch && user !== undefined && ifMatch === undefined) {
      throw new HttpError(problems.preconditionRequired, 'This server requires If-Match on PUT and DELETE of an existing user: GET it for its ETag.');
    }
  }

  async function readUser(req: IncomingMessage): Promise<{ raw: Buffer; body: Record<string, unknown> }> {
    requireJson(req);
    const raw = await readBody(req, config.maxBody);
    return { raw, body: checkUser(parseJson(raw)) };
  }

  /** The next id to issue; 503 once the safe integers are used up. */
  function nextId(): number {
    const id = state.nextId();
    if (id === undefined) throw new HttpError(problems.idSpaceExhausted, 'Every safe integer id has been issued.');
    return id;
  }

  /** The representation: the body as given, plus the id (kept in place when the body carries it). */
  function represent(body: Record<string, unknown>, id: number): string {
    return JSON.stringify(Object.assign({}, body, { id }));
  }

  /** Sends a user after a write: 201/200, or 204 for Prefer: return=minimal. */
  function sendWritten(ctx: Context, status: 200 | 201, id: number, json: string, raw: Buffer, extra: Record<string, string>): void {
    const headers: Record<string, string> = { ...extra, 'Content-Location': userPath(id) };
    // RFC 9110 section 9.3.4: a validator only when the stored representation
    // is exactly the content received.
    if (raw.length === Buffer.byteLength(json) && raw.toString('utf8') === json) headers.ETag = etagOf(state.users.get(id)!);
    if (prefersMinimal(header(ctx.req, 'prefer'))) {
      headers['Preference-Applied'] = 'return=minimal';
      delete headers['Content-Location'];
      sendEmpty(ctx.res, 204, headers);
      return;
    }
    sendJson(ctx.res, status, json, headers);
  }

  /**
   * GET and HEAD of one user. The answer is decided at once; when writes
   * are still being synced it is sent after them, so a client is never
   * shown a write that a crash could take back. With nothing pending (the
   * common case) it is sent in the same call: no promise is made. A refusal
   * is thrown, and the app waits for pending writes before answering it.
   */
  function getUser(ctx: Context): void | Promise<void> {
    const answer = lookUp(ctx);
    const pending = store.durable();
    if (pending === undefined) answer.send(ctx.res);
    else return pending.then(() => answer.send(ctx.res));
  }

  function lookUp(ctx: Context): Answer {
    let ref: ReturnType<typeof refOf>;
    let found: Target;
    try {
      ref = refOf(ctx);
      sessions.authorize(ctx.req, ctx.res, ctx.now, 'read');
      found = resolve(ref);
    } catch (error) {
      if (error instanceof Redirect) return new Answer(301, undefined, { Location: error.location });
      throw error;
    }
    const { user, byAlias } = found;
    if (user === undefined) throw notFound('No such user.');
    const etag = etagOf(user);
    const headers: Record<string, string> = { ETag: etag };
    if (byAlias !== undefined) headers['Content-Location'] = userPath(user.id);
    const ifNoneMatch = ctx.req.headers['if-none-match'];
    if (ifNoneMatch !== undefined && etagMatches(ifNoneMatch, etag, true)) return new Answer(304, undefined, headers);
    return new Answer(200, user.json, headers);
  }

  async function putUser(ctx: Context): Promise<void> {
    const ref = refOf(ctx);
    sessions.authorize(ctx.req, ctx.res, ctx.now, 'write');
    const { raw, body } = await readUser(ctx.req);
    // From here to the commit nothing awaits: the checks and the write see one state.
    const target = resolve(ref);
    const bodyId = body.id as number | undefined;
    if (target.user !== undefined) {
      const user = target.user;
      checkPreconditions(ctx.req, user);
      if (bodyId !== undefined && bodyId !== user.id) {
        if (!config.allowIdChange) throw new HttpError(problems.idConflict, `The body says id ${bodyId} but this user is ${user.id}; ids are assigned by the server.`);
        if (state.isIssued(bodyId)) throw new HttpError(problems.idConflict, `The id ${bodyId} has already been issued; a user can only move to an id never issued before.`);
        const json = represent(body, bodyId);
        await store.commit([{ op: 'move', from: user.id, to: bodyId, json }]);
        sendWritten(ctx, 200, bodyId, json, raw, { Location: userPath(bodyId) });
        return;
      }
      const json = represent(body, user.id);
      await store.commit([{ op: 'put', id: user.id, json }]);
      sendWritten(ctx, 200, user.id, json, raw, {});
      return;
    }
    let id: number;
    if (target.byAlias !== undefined) {
      // Rule 3: an alias that names nobody creates a user with a fresh id.
      id = nextId();
      if (bodyId !== undefined && bodyId !== id) {
        if (!config.allowIdChange) throw new HttpError(problems.idConflict, 'The body carries an id, but a user created through an alias gets its id from the server.');
        if (state.isIssued(bodyId)) throw new HttpError(problems.idConflict, `The id ${bodyId} has already been issued.`);
        id = bodyId;
      }
    } else {
      // Rule 4: an id that names nobody is created only under a live reservation.
      id = target.id!;
      if (!state.isReservationLive(id, ctx.now)) {
        if (state.isIssued(id)) throw new HttpError(problems.gone, `The id ${id} was issued, but its reservation expired or its user was deleted; reserve a new id.`);
        throw notFound(`The id ${id} was never issued: reserve one with POST ${RESERVATIONS_PATH}, or PUT under an alias.`);
      }
    }
    // RFC 9110 section 13.2.1: preconditions are evaluated only where the
    // answer without them would be a success, so after 404 and 410.
    checkPreconditions(ctx.req, undefined);
    if (bodyId !== undefined && bodyId !== id && target.byAlias === undefined) {
      throw new HttpError(problems.idConflict, `The body says id ${bodyId} but the reserved id is ${id}.`);
    }
    const json = represent(body, id);
    await store.commit([{ op: 'put', id, alias: target.byAlias, json }]);
    sendWritten(ctx, 201, id, json, raw, { Location: userPath(id) });
  }

  async function deleteUser(ctx: Context): Promise<void> {
    const ref = refOf(ctx);
    sessions.authorize(ctx.req, ctx.res, ctx.now, 'write');
    const { user } = resolve(ref);
    if (user === undefined) throw notFound('No such user.');
    checkPreconditions(ctx.req, user);
    await store.commit([{ op: 'delete', id: user.id }]);
    sendEmpty(ctx.res, 204);
  }

  async function listUsers(ctx: Context): Promise<void> {
    sessions.authorize(ctx.req, ctx.res, ctx.now, 'read');
    const params = new URLSearchParams(ctx.query);
    const limit = integerParam(params, 'limit', DEFAULT_PAGE, 1, MAX_PAGE);
    const after = integerParam(params, 'after', 0, 0, Number.MAX_SAFE_INTEGER);
    const ids = state.sortedIds;
    const start = firstIdAfter(ids, after);
    const end = Math.min(ids.length, start + limit);
    let items = '';
    for (let i = start; i < end; i++) items += (i === start ? '' : ',') + state.users.get(ids[i]!)!.json;
    const next = end < ids.length ? JSON.stringify(`${USERS_PATH}?after=${ids[end - 1]}&limit=${limit}`) : 'null';
    const pending = store.durable();
    if (pending !== undefined) await pending;
    sendJson(ctx.res, 200, `{"items":[${items}],"next":${next}}`);
  }

  /**
   * Runs a POST create under its Idempotency-Key, if any: the first response
   * is kept for 24 hours and replayed for the same key and body; the same key
   * with another body is 422, and while the first is in flight, 409.
   * `run` is synchronous and its mutations are committed in the same tick,
   * so no other request can take the id it picked.
   */
  async function createOnce(ctx: Context, scope: string, run: (raw: Buffer) => Created): Promise<void> {
    const { req, res, now } = ctx;
    const key = header(req, 'idempotency-key');
    if (key === undefined) {
      const created = run(await readBody(req, config.maxBody));
      await store.commit(created.mutations);
      sendCreated(res, created, false);
      return;
    }
    if (!IDEMPOTENCY_KEY.test(key)) throw new HttpError(problems.invalidHeader, 'Idempotency-Key must be 1 to 255 visible ASCII characters.');
    const scopedKey = `${scope} ${key}`;
    if (inProgress.has(scopedKey)) throw new HttpError(problems.idempotencyInProgress, 'A request with this Idempotency-Key is still in progress; retry later.', { 'Retry-After': '1' });
    inProgress.add(scopedKey);
    try {
      const raw = await readBody(req, config.maxBody);
      const fingerprint = createHash('sha256').update(raw).digest('base64url');
      const kept = state.idempotencyRecord(scopedKey, now);
      if (kept !== undefined) {
        if (kept.fingerprint !== fingerprint) throw new HttpError(problems.idempotencyKeyReused, 'This Idempotency-Key was used with a different request body.');
        // The kept response may belong to a commit still being synced.
        const pending = store.durable();
        if (pending !== undefined) await pending;
        sendCreated(res, { status: kept.status, body: kept.body, location: kept.location ?? '' }, true);
        return;
      }
      const created = run(raw);
      const record = { fingerprint, status: created.status, body: created.body, location: created.location, expiresAt: now + IDEMPOTENCY_TTL_MS };
      await store.commit([...created.mutations, { op: 'idempotency', key: scopedKey, record }]);
      sendCreated(res, created, false);
    } finally {
      inProgress.delete(scopedKey);
    }
  }

  async function createUser(ctx: Context): Promise<void> {
    sessions.authorize(ctx.req, ctx.res, ctx.now, 'write');
    requireJson(ctx.req);
    await createOnce(ctx, NEW_USER_PATH, (raw) => {
      const body = checkUser(parseJson(raw));
      if (body.id !== undefined) throw new HttpError(problems.idConflict, 'POST /users/new assigns the id; leave id out of the body.');
      const id = nextId();
      const json = represent(body, id);
      return { status: 201, body: json, location: userPath(id), mutations: [{ op: 'put', id, json }] };
    });
  }

  async function reserve(ctx: Context): Promise<void> {
    sessions.authorize(ctx.req, ctx.res, ctx.now, 'write');
    refuseFormBody(ctx.req);
    await createOnce(ctx, RESERVATIONS_PATH, () => {
      const now = ctx.now;
      if (state.reservations.size >= config.maxReservations) state.sweep(now);
      if (state.reservations.size >= config.maxReservations) {
        let earliest = Infinity;
        for (const expiresAt of state.reservations.values()) if (expiresAt < earliest) earliest = expiresAt;
        const retryAfter = Math.max(1, Math.ceil((earliest - now) / 1000));
        throw new HttpError(problems.tooManyReservations, `There are ${config.maxReservations} live reservations; retry when one expires.`, { 'Retry-After': String(retryAfter) });
      }
      const id = nextId();
      const expiresAt = now + config.reservationTtl * 1000;
      const body = JSON.stringify({ id, expiresAt: new Date(expiresAt).toISOString() });
      return { status: 201, body, location: userPath(id), mutations: [{ op: 'reserve', id, expiresAt }] };
    });
  }

  function handleRedirects(handler: (ctx: Context) => Promise<void> | void) {
    return async (ctx: Context) => {
      try {
        await handler(ctx);
      } catch (error) {
        if (!(error instanceof Redirect)) throw error;
        sendEmpty(ctx.res, 301, { Location: error.location });
      }
    };
  }

  return [
    { method: 'GET', path: USERS_PATH, handler: listUsers },
    { method: 'POST', path: NEW_USER_PATH, handler: createUser },
    { method: 'GET', path: `${USERS_PATH}/:ref`, handler: getUser },
    { method: 'PUT', path: `${USERS_PATH}/:ref`, handler: handleRedirects(putUser) },
    { method: 'DELETE', path: `${USERS_PATH}/:ref`, handler: handleRedirects(deleteUser) },
    { method: 'POST', path: RESERVATIONS_PATH, handler: reserve },
  ];
}

/** A GET answer decided before it is sent. */
class Answer {
  constructor(
    readonly status: 200 | 301 | 304,
    readonly json: string | undefined,
    readonly headers: Record<string, string>,
  ) {}

  send(res: ServerResponse): void {
    if (this.json === undefined) sendEmpty(res, this.status, this.headers);
    else sendJson(res, this.status, this.json, this.headers);
  }
}

/** Thrown by `resolve` for an old id of a moved user: answered 301, not a problem. */
class Redirect extends Error {
  constructor(readonly location: string) {
    super(location);
  }
}

/** PUT rule 1: the body must be application/json or a +json type, else 415. */
function requireJson(req: IncomingMessage): void {
  if (!isJsonContentType(req.headers['content-type'])) {
    throw new HttpError(problems.unsupportedMediaType, 'Send the user as Content-Type: application/json (UTF-8).');
  }
}

// The Content-Types an HTML form (or a CORS "simple" request) can send
// cross-site without a preflight (Fetch standard, CORS-safelisted request-header).
const FORM_TYPES = new Set(['application/x-www-form-urlencoded', 'multipart/form-data', 'text/plain']);

/**
 * POST /reservations ignores its body, so on its own a cross-site form
 * posting to it with the user's cookie would reserve an id. A body labelled
 * as form content is refused (415), as it is on every other write.
 */
function refuseFormBody(req: IncomingMessage): void {
  const type = req.headers['content-type'];
  if (type === undefined) return;
  const semicolon = type.indexOf(';');
  if (FORM_TYPES.has((semicolon === -1 ? type : type.slice(0, semicolon)).trim().toLowerCase())) {
    throw new HttpError(problems.unsupportedMediaType, 'POST /reservations takes no form content: send no body, or application/json.');
  }
}

function checkUser(value: unknown): Record<string, unknown> {
  try {
    return validateUserBody(value);
  } catch (error) {
    if (!(error instanceof UserValidationError)) throw error;
    throw new HttpError(problems.invalidUser, error.message + (error.field ? ` (field "${error.field}").` : '.'), {}, { field: error.field });
  }
}

function sendCreated(res: ServerResponse, created: Pick<Created, 'status' | 'body' | 'location'>, replayed: boolean): void {
  const headers: Record<string, string> = { Location: created.location };
  if (replayed) headers['Idempotent-Replayed'] = 'true';
  sendJson(res, created.status, created.body, headers);
}

function integerParam(params: URLSearchParams, name: string, fallback: number, min: number, max: number): number {
  const values = params.getAll(name);
  if (values.length === 0) return fallback;
  const text = values[0]!;
  const n = values.length === 1 && /^\d{1,16}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new HttpError(problems.invalidQuery, `${name} must be one integer from ${min} to ${max}.`, {}, { parameter: name });
  }
  return n;
}
