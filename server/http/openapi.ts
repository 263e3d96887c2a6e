import { LOGIN_PATH, SESSION_COOKIE } from '../../shared/endpoints.js';
import { problems, problemType, PROBLEM_CONTENT_TYPE } from '../../shared/problems.js';
import { ALIAS_MAX_LENGTH, MAX_DEPTH, NAME_MAX_LENGTH } from '../../shared/user.js';
import { METRICS_CONTENT_TYPE } from '../ops/metrics.js';
import type { Route } from './router.js';

/**
 * The OpenAPI 3.1 description of the API, built once at start from the
 * route table and the descriptions below. Every route must have a
 * description and every description a route, or the server does not start:
 * the document cannot drift from what is served. HEAD (on every GET path)
 * and OPTIONS (on every path) are answered by the router and described in
 * the document's introduction rather than as operations.
 */

type Json = Record<string, unknown>;

/** Problem statuses any request can meet: a malformed message or target, a timeout, the rate limit, a bug. */
const COMMON_PROBLEMS = [400, 408, 429, 431, 500];

interface OperationSpec {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  /** Security requirements; [] for none. */
  security: Json[];
  parameters?: Json[];
  requestBody?: Json;
  /** The responses that are not problem documents. */
  responses: Record<string, Json>;
  /** Problem statuses besides COMMON_PROBLEMS. */
  problems: number[];
  /** The flag the route exists under; without it the route is absent, and so is this description. */
  onlyWith?: string;
}

const ref = (kind: string, name: string): Json => ({ $ref: `#/components/${kind}/${name}` });
const schema = (name: string): Json => ref('schemas', name);
const parameter = (name: string): Json => ref('parameters', name);

/** Response headers by name, each with X-Request-Id, which every response carries. */
function headers(...names: string[]): Json {
  const out: Json = { 'X-Request-Id': ref('headers', 'X-Request-Id') };
  for (const name of names) out[name] = ref('headers', name);
  return out;
}

function json(description: string, body: Json, ...headerNames: string[]): Json {
  return { description, headers: headers(...headerNames), content: { 'application/json': { schema: body } } };
}

function html(description: string, ...headerNames: string[]): Json {
  return { description, headers: headers(...headerNames), content: { 'text/html': { schema: { type: 'string' } } } };
}

function empty(description: string, ...headerNames: string[]): Json {
  return { description, headers: headers(...headerNames) };
}

/** Optional session: required or not depending on --require-session. */
const SESSION_OPTIONAL: Json[] = [{}, { session: [] }];
const NEEDS_SESSION = 'Under `--require-session writes` or `all` this needs a valid session (401 without one, 403 for a `reader` session).';
const NEEDS_SESSION_TO_READ = 'Under `--require-session all` this needs a valid session (401 without one).';

const OPERATIONS: Record<string, OperationSpec> = {
  'GET /': {
    operationId: 'getSessionStatus',
    summary: 'Whether the request carries a valid session',
    description:
      'Both answers are JSON strings, not problem documents, with `Cache-Control: no-store` and `Vary: Cookie`. A session signed by an older key is re-issued (`Set-Cookie`). ' +
      'With `--login-page`, a request without a session whose `Accept` weighs `text/html` above `application/json` is redirected (302) to `/login`, and every answer carries `Vary: Accept, Cookie`.',
    tags: ['sessions'],
    security: SESSION_OPTIONAL,
    responses: {
      '200': json('A valid session.', { const: 'OK' }, 'Set-Cookie'),
      '302': empty('`--login-page` only: a browser without a session; `Location: /login`.', 'Location'),
      '401': json('No valid session.', { const: 'not authorized' }, 'WWW-Authenticate'),
    },
    problems: [],
  },
  'GET /login': {
    operationId: 'getLoginPage',
    summary: 'The browser sign-in page (`--login-page`)',
    description:
      'An HTML form that posts `username`, `password` and a signed `csrf` token to `POST /login` (`application/x-www-form-urlencoded`); ' +
      'the token\'s nonce is also set in the `LOGIN_FORM` cookie. With a valid session: "Signed in as NAME" and a sign-out form to `POST /logout`. ' +
      'Strict `Content-Security-Policy`, `X-Frame-Options: DENY`, `Cache-Control: no-store`. Exists only with `--login-page`.',
    tags: ['sessions'],
    security: SESSION_OPTIONAL,
    responses: { '200': html('The sign-in page, or the sign-out page for a valid session.', 'Set-Cookie') },
    problems: [],
    onlyWith: '--login-page',
  },
  'POST /login': {
    operationId: 'login',
    summary: 'Open a session with HTTP Basic credentials',
    description:
      'Any request body is read and ignored. Failed logins are rate limited per address and account. ' +
      'With `--login-page`, a form body (`application/x-www-form-urlencoded`) without `Authorization` is the sign-in page\'s: ' +
      '303 to `/` with the session cookie, or the page again (HTML) with 401 (wrong password), 403 (bad or expired `csrf` token, another `Origin`) or 429.',
    tags: ['sessions'],
    security: [{ basic: [] }],
    responses: {
      '200': json('Logged in: the session cookie is set.', { const: 'OK' }, 'Set-Cookie'),
      '303': empty('`--login-page` form: signed in; `Location: /`, the session cookie is set.', 'Location', 'Set-Cookie'),
    },
    problems: [401, 403, 413],
  },
  'POST /logout': {
    operationId: 'logout',
    summary: 'Revoke every valid session the request carries and clear the cookie',
    description:
      'Answers 204 whether or not a session was sent. Any request body is read and ignored. ' +
      'With `--login-page`: a request whose `Origin` is another origin is refused (403), and a form body is the sign-out form\'s: ' +
      'it needs the page\'s `csrf` token, then answers 303 to `/login` (else 403 and the page again).',
    tags: ['sessions'],
    security: SESSION_OPTIONAL,
    responses: {
      '204': empty('Logged out: the cookie is cleared.', 'Set-Cookie'),
      '303': empty('`--login-page` form: signed out; `Location: /login`, the cookie is cleared.', 'Location', 'Set-Cookie'),
    },
    problems: [403, 413],
  },
  'GET /users': {
    operationId: 'listUsers',
    summary: 'List users in ascending id order',
    description: `Unknown query parameters are ignored. ${NEEDS_SESSION_TO_READ}`,
    tags: ['users'],
    security: SESSION_OPTIONAL,
    parameters: [parameter('limit'), parameter('after')],
    responses: { '200': json('A page of users.', schema('UserPage')) },
    problems: [401],
  },
  'POST /users/new': {
    operationId: 'createUser',
    summary: 'Create a user with the next id',
    description: `Not idempotent, unless \`Idempotency-Key\` is sent: then the first successful response is kept for 24 hours and replayed for the same key and body. ${NEEDS_SESSION}`,
    tags: ['users'],
    security: SESSION_OPTIONAL,
    parameters: [parameter('Idempotency-Key')],
    requestBody: { required: true, description: 'The user, without `id`.', content: { 'application/json': { schema: schema('User') } } },
    responses: { '201': json('Created; `Location` names the user.', schema('User'), 'Location', 'Idempotent-Replayed') },
    problems: [401, 403, 409, 413, 415, 422, 503],
  },
  'GET /users/:ref': {
    operationId: 'getUser',
    summary: 'Read a user by id or alias',
    description: NEEDS_SESSION_TO_READ,
    tags: ['users'],
    security: SESSION_OPTIONAL,
    parameters: [parameter('ref'), parameter('If-None-Match')],
    responses: {
      '200': json('The stored representation.', schema('User'), 'ETag', 'Content-Location'),
      '301': empty('The id belonged to a user that moved (`--allow-id-change`).', 'Location'),
      '304': empty('`If-None-Match` matches the current `ETag`.', 'ETag', 'Content-Location'),
    },
    problems: [401, 404],
  },
  'PUT /users/:ref': {
    operationId: 'putUser',
    summary: 'Create or replace a user',
    description: `Replaces an existing user (200), creates one through an unbound alias (201) or under a live reservation (201). With \`Prefer: return=minimal\`: 204. ${NEEDS_SESSION}`,
    tags: ['users'],
    security: SESSION_OPTIONAL,
    parameters: [parameter('ref'), parameter('If-Match'), parameter('If-None-Match'), parameter('Prefer')],
    requestBody: { required: true, description: 'The whole user; `id`, if present, must be the target\'s.', content: { 'application/json': { schema: schema('User') } } },
    responses: {
      '200': json('Replaced (or moved, under `--allow-id-change`).', schema('User'), 'Content-Location', 'ETag', 'Location'),
      '201': json('Created; `Location` names the user.', schema('User'), 'Location', 'Content-Location', 'ETag'),
      '204': empty('Written, with `Prefer: return=minimal`.', 'Preference-Applied', 'Location'),
      '301': empty('The id belonged to a user that moved (`--allow-id-change`).', 'Location'),
    },
    problems: [401, 403, 404, 409, 410, 412, 413, 415, 422, 428, 503],
  },
  'DELETE /users/:ref': {
    operationId: 'deleteUser',
    summary: 'Delete a user; its id is retired, its alias released',
    description: NEEDS_SESSION,
    tags: ['users'],
    security: SESSION_OPTIONAL,
    parameters: [parameter('ref'), parameter('If-Match')],
    responses: {
      '204': empty('Deleted.'),
      '301': empty('The id belonged to a user that moved (`--allow-id-change`).', 'Location'),
    },
    problems: [401, 403, 404, 412, 428],
  },
  'POST /reservations': {
    operationId: 'reserveId',
    summary: 'Reserve the next id for --reservation-ttl seconds',
    description: `The request body is ignored, but counts against \`--max-body\` and in the \`Idempotency-Key\` fingerprint; form content (\`application/x-www-form-urlencoded\`, \`multipart/form-data\`, \`text/plain\`) is refused with 415, so a cross-site form cannot reserve ids. ${NEEDS_SESSION}`,
    tags: ['users'],
    security: SESSION_OPTIONAL,
    parameters: [parameter('Idempotency-Key')],
    responses: { '201': json('Reserved; `Location` names the id to PUT to.', schema('Reservation'), 'Location', 'Idempotent-Replayed') },
    problems: [401, 403, 409, 413, 415, 422, 503],
  },
  'GET /healthz': {
    operationId: 'getHealth',
    summary: 'Liveness check',
    tags: ['operations'],
    security: [],
    responses: { '200': json('The server is serving.', schema('Health')) },
    problems: [],
  },
  'GET /metrics': {
    operationId: 'getMetrics',
    summary: 'Metrics in the Prometheus text format 0.0.4',
    description: `Request counts by route, method and status, a latency histogram, users, live reservations, journal size, fsync latency. ${NEEDS_SESSION_TO_READ}`,
    tags: ['operations'],
    security: SESSION_OPTIONAL,
    responses: { '200': { description: 'The exposition.', headers: headers(), content: { [METRICS_CONTENT_TYPE]: { schema: { type: 'string' } } } } },
    problems: [401],
  },
  'GET /openapi.json': {
    operationId: 'getOpenApi',
    summary: 'This document',
    tags: ['operations'],
    security: [],
    parameters: [parameter('If-None-Match')],
    responses: {
      '200': json('The OpenAPI 3.1 description of the API.', { type: 'object' }, 'ETag'),
      '304': empty('`If-None-Match` matches the current `ETag`.', 'ETag'),
    },
    problems: [],
  },
};

/** Titles of statuses that have no entry in the problem catalog. */
const EXTRA_PROBLEM_TITLES: Record<number, string> = { 429: 'Too many requests: the rate limit (`--rate-limit`, failed logins)' };

/** Response headers that come with particular problem statuses. */
const PROBLEM_HEADERS: Record<number, string[]> = {
  401: ['WWW-Authenticate'],
  409: ['Retry-After'],
  429: ['Retry-After', 'RateLimit-Policy', 'RateLimit'],
  503: ['Retry-After'],
};

function problemResponse(status: number): Json {
  const kinds = Object.values(problems).filter((k) => k.status === status);
  const listed = kinds.map((k) => `\`${k.code}\` (${k.title})`).join('; ');
  const description = listed !== '' ? `Problem document: ${listed}.` : `Problem document. ${EXTRA_PROBLEM_TITLES[status] ?? ''}`.trim();
  return { description, headers: headers(...(PROBLEM_HEADERS[status] ?? [])), content: { [PROBLEM_CONTENT_TYPE]: { schema: schema('Problem') } } };
}

function operation(spec: OperationSpec): Json {
  const responses: Json = { ...spec.responses };
  const statuses = [...new Set([...spec.problems, ...COMMON_PROBLEMS])].sort((a, b) => a - b);
  for (const status of statuses) responses[String(status)] ??= ref('responses', `Problem${status}`);
  return {
    operationId: spec.operationId,
    summary: spec.summary,
    ...(spec.description !== undefined && { description: spec.description }),
    tags: spec.tags,
    security: spec.security,
    parameters: [...(spec.parameters ?? []), parameter('X-Request-Id')],
    ...(spec.requestBody !== undefined && { requestBody: spec.requestBody }),
    responses,
  };
}

/** `/users/:ref` as OpenAPI writes it: `/users/{ref}`. */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z_]\w*)/g, '{$1}');
}

/** Builds the document from the route table; throws when a route and the descriptions disagree. */
export function buildOpenApi(routes: readonly Route[]): Json {
  const paths: Record<string, Json> = {};
  const described = new Set<string>();
  for (const route of routes) {
    const key = `${route.method} ${route.path}`;
    const spec = OPERATIONS[key];
    if (spec === undefined) throw new Error(`openapi.ts has no description of the route ${key}`);
    described.add(key);
    (paths[openApiPath(route.path)] ??= {})[route.method.toLowerCase()] = operation(spec);
  }
  const stale = Object.keys(OPERATIONS).filter((key) => !described.has(key) && OPERATIONS[key]!.onlyWith === undefined);
  if (stale.length > 0) throw new Error(`openapi.ts describes routes that do not exist: ${stale.join(', ')}`);
  const problemStatuses = new Set<number>(COMMON_PROBLEMS);
  for (const spec of Object.values(OPERATIONS)) for (const status of spec.problems) problemStatuses.add(status);
  const responses: Json = {};
  for (const status of [...problemStatuses].sort((a, b) => a - b)) responses[`Problem${status}`] = problemResponse(status);
  return {
    openapi: '3.1.0',
    info: {
      title: 'users-server',
      version: '1',
      description:
        'A user resource with signed-cookie sessions. HEAD is answered on every path that has GET, like GET without a body; ' +
        'OPTIONS on every path answers 204 with `Allow`; another method on a known path answers 405 with `Allow`; an unknown path 404. ' +
        'Every response carries `X-Request-Id`. Errors are `application/problem+json` (RFC 9457); their `type` values are listed in the `Problem` schema.',
    },
    tags: [
      { name: 'sessions', description: 'Login, logout and the session check.' },
      { name: 'users', description: 'The user resource, listing and reservations.' },
      { name: 'operations', description: 'Health, metrics and this document.' },
    ],
    paths,
    components: { schemas: SCHEMAS, parameters: PARAMETERS, headers: HEADERS, responses, securitySchemes: SECURITY_SCHEMES },
  };
}

const SCHEMAS: Json = {
  User: {
    type: 'object',
    description: `Any JSON object with a \`name\`; other fields are kept and returned as given. No key \`__proto__\`, \`constructor\` or \`prototype\` at any depth; at most ${MAX_DEPTH} levels of nesting.`,
    required: ['name'],
    properties: {
      name: { type: 'string', minLength: 1, maxLength: NAME_MAX_LENGTH, description: 'No control characters; length in Unicode code points.' },
      id: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'Assigned by the server; in a request body optional, and must equal the target\'s id.' },
    },
    additionalProperties: true,
  },
  UserPage: {
    type: 'object',
    required: ['items', 'next'],
    properties: {
      items: { type: 'array', items: schema('User') },
      next: { type: ['string', 'null'], description: 'The path of the next page, or null on the last page.', examples: ['/users?after=2&limit=2'] },
    },
  },
  Reservation: {
    type: 'object',
    required: ['id', 'expiresAt'],
    properties: { id: { type: 'integer', minimum: 1 }, expiresAt: { type: 'string', format: 'date-time', description: 'RFC 3339, UTC, milliseconds.' } },
  },
  Health: { type: 'object', required: ['status'], properties: { status: { const: 'ok' } } },
  Problem: {
    type: 'object',
    description: 'RFC 9457 problem details. `type` is a tag URI (RFC 4151) naming the kind of error; see `x-problem-types`.',
    required: ['type', 'title', 'status', 'detail'],
    properties: {
      type: { type: 'string', format: 'uri', examples: [problemType(problems.notFound)] },
      title: { type: 'string', description: 'Fixed per type.' },
      status: { type: 'integer' },
      detail: { type: 'string', description: 'This occurrence; wording may change.' },
      field: { type: 'string', description: '`invalid-user` only: the path of the offending value, "" for the body itself.' },
      parameter: { type: 'string', description: '`invalid-query` only: `limit` or `after`.' },
    },
    'x-problem-types': Object.values(problems).map((k) => ({ type: problemType(k), status: k.status, title: k.title })),
  },
};

const stringHeader = (description: string, extra: Json = {}): Json => ({ description, schema: { type: 'string', ...extra } });

const PARAMETERS: Json = {
  ref: {
    name: 'ref',
    in: 'path',
    required: true,
    description: `An id (canonical decimal, 1..2^53-1) or an alias (1..${ALIAS_MAX_LENGTH} of \`A-Z a-z 0-9 . _ ~ -\`, at least one non-digit, not \`new\`, not \`.\` or \`..\`).`,
    schema: { type: 'string' },
  },
  limit: { name: 'limit', in: 'query', description: 'Page size.', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } },
  after: { name: 'after', in: 'query', description: 'List users with ids above this one.', schema: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER, default: 0 } },
  'If-Match': { name: 'If-Match', in: 'header', description: 'Strong comparison; `*` matches any existing user.', schema: { type: 'string' } },
  'If-None-Match': { name: 'If-None-Match', in: 'header', description: 'Weak comparison on GET (304); on PUT, a match or `*` on an existing user is 412.', schema: { type: 'string' } },
  Prefer: { name: 'Prefer', in: 'header', description: '`return=minimal`: answer 204 without a body.', schema: { type: 'string' } },
  'Idempotency-Key': { name: 'Idempotency-Key', in: 'header', description: '1..255 visible ASCII characters.', schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' } },
  'X-Request-Id': {
    name: 'X-Request-Id',
    in: 'header',
    description: 'Echoed in the response when it is 1..128 of `A-Z a-z 0-9 . _ : -`; otherwise the server makes one.',
    schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
  },
};

const HEADERS: Json = {
  'X-Request-Id': stringHeader('The id of this exchange in the access log: the request\'s own when sane, else generated.'),
  ETag: stringHeader('Strong entity tag of the representation.'),
  Location: stringHeader('The URI of the user, e.g. `/users/1`.'),
  'Content-Location': stringHeader('The user\'s canonical URI, `/users/{id}`.'),
  'Set-Cookie': stringHeader(`The \`${SESSION_COOKIE}\` session cookie: \`Path=/; HttpOnly; SameSite=Lax; Max-Age=...\`, plus \`Secure\` with \`--cookie-secure\`.`),
  'WWW-Authenticate': stringHeader(`\`Cookie realm="users", cookie-name="${SESSION_COOKIE}", form-action="${LOGIN_PATH}"\`, or \`Basic realm="users"\` for a failed login.`),
  'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Policy': stringHeader('The rate limit policy (IETF httpapi RateLimit header fields draft).'),
  RateLimit: stringHeader('The remaining quota and its reset (IETF httpapi RateLimit header fields draft).'),
  'Idempotent-Replayed': stringHeader('`true` when the response replays the one kept for the Idempotency-Key.', { const: 'true' }),
  'Preference-Applied': stringHeader('`return=minimal`.', { const: 'return=minimal' }),
};

const SECURITY_SCHEMES: Json = {
  session: { type: 'apiKey', in: 'cookie', name: SESSION_COOKIE, description: 'The signed session cookie set by `POST /login`. Which requests need it depends on `--require-session`.' },
  basic: { type: 'http', scheme: 'basic', description: '`POST /login` only.' },
};
