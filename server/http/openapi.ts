/**
 * The OpenAPI 3.1 description of the API, built at start from the route
 * table: each route carries the description of its operation (route.ts),
 * written beside its handler, so the document cannot drift from what is
 * served. This file adds what every operation shares: the problem
 * responses, the components, the introduction. HEAD (on every GET path)
 * and OPTIONS (on every path) are answered by the router and described in
 * the introduction rather than as operations.
 */
import { LOGIN_PATH, MAX_TOKEN_LIFETIME, SESSION_COOKIE } from '../../shared/endpoints.js';
import { problems, problemType, PROBLEM_CONTENT_TYPE } from '../../shared/problems.js';
import { ALIAS_MAX_LENGTH, MAX_DEPTH, NAME_MAX_LENGTH } from '../../shared/user.js';
import { MAX_FILTER_CONDITIONS, MAX_FILTER_DEPTH, MAX_FILTER_LENGTH } from '../users/filter-parse.js';
import { MAX_SORT_KEYS } from '../users/sort.js';
import type { SchemaSetting } from '../users/user-schema.js';
import type { Route } from './route.js';

type Json = Record<string, unknown>;

/**
 * Problem statuses any request can meet: a malformed message or target, a timeout, a host not this server's, the rate
 * limit, a bug, a transfer coding not implemented, a database out of reach.
 */
const COMMON_PROBLEMS = [400, 408, 414, 421, 429, 431, 500, 501, 503];

const ref = (kind: string, name: string): Json => ({ $ref: `#/components/${kind}/${name}` });
export const schema = (name: string): Json => ref('schemas', name);
export const parameter = (name: string): Json => ref('parameters', name);

/** Response headers by name, each with X-Request-Id, which every response carries. */
export function headers(...names: string[]): Json {
  const out: Json = { 'X-Request-Id': ref('headers', 'X-Request-Id') };
  for (const name of names) out[name] = ref('headers', name);
  return out;
}

export function json(description: string, body: Json, ...headerNames: string[]): Json {
  return { description, headers: headers(...headerNames), content: { 'application/json': { schema: body } } };
}

export function html(description: string, ...headerNames: string[]): Json {
  return { description, headers: headers(...headerNames), content: { 'text/html': { schema: { type: 'string' } } } };
}

/** A status answered with a problem document, or (the sign-in page's forms, `--login-page`) with the HTML page. */
export function problemOrPage(description: string, ...headerNames: string[]): Json {
  return {
    description,
    headers: headers(...headerNames),
    content: { [PROBLEM_CONTENT_TYPE]: { schema: schema('Problem') }, 'text/html': { schema: { type: 'string' } } },
  };
}

export function empty(description: string, ...headerNames: string[]): Json {
  return { description, headers: headers(...headerNames) };
}

/** Optional session or API token: required or not depending on --require-session. */
export const SESSION_OPTIONAL: Json[] = [{}, { session: [] }, { bearer: [] }];
/** An admin's session or API token, in every mode. */
export const ADMIN_ONLY: Json[] = [{ session: [] }, { bearer: [] }];
export const NEEDS_SESSION =
  "Under `--require-session all` (the default) or `writes` this needs a valid session or API token (401 without one). A `reader`'s session or token is 403 in every mode, and a Bearer token that is sent is checked in every mode (401 `invalid-token`).";
export const NEEDS_SESSION_TO_READ =
  'Under `--require-session all` (the default) this needs a valid session or API token (401 without one). A Bearer token that is sent is checked in every mode (401 `invalid-token`).';

/** Titles of statuses that have no entry in the problem catalog. */
const EXTRA_PROBLEM_TITLES: Record<number, string> = {
  429: 'Too many requests: the rate limit (`--rate-limit`, failed logins)',
};

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
  const description =
    listed !== '' ? `Problem document: ${listed}.` : `Problem document. ${EXTRA_PROBLEM_TITLES[status] ?? ''}`.trim();
  return {
    description,
    headers: headers(...(PROBLEM_HEADERS[status] ?? [])),
    content: { [PROBLEM_CONTENT_TYPE]: { schema: schema('Problem') } },
  };
}

/**
 * The statuses a route's own description leaves out: 403 for a state-changing request from another site with the cookie
 * (app.ts).
 */
function implied(route: Route): number[] {
  return route.method !== 'GET' && route.path !== LOGIN_PATH ? [403] : [];
}

function operation(route: Route): Json {
  const spec = route.doc;
  const responses: Json = { ...spec.responses };
  const statuses = [...new Set([...spec.problems, ...implied(route), ...COMMON_PROBLEMS])].sort((a, b) => a - b);
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

/**
 * Builds the document from the route table; with the schema of the users'
 * fields (`users-server schema set`), the User schema is the fixed rules
 * and that schema together (allOf), so a generated client knows the fields.
 */
export function buildOpenApi(routes: readonly Route[], userSchema?: SchemaSetting): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) (paths[openApiPath(route.path)] ??= {})[route.method.toLowerCase()] = operation(route);
  const problemStatuses = new Set<number>(COMMON_PROBLEMS);
  for (const route of routes)
    for (const status of [...route.doc.problems, ...implied(route)]) problemStatuses.add(status);
  const responses: Json = {};
  for (const status of [...problemStatuses].sort((a, b) => a - b))
    responses[`Problem${status}`] = problemResponse(status);
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
      { name: 'tokens', description: 'API tokens for scripts and scrapers (`Authorization: Bearer`).' },
      { name: 'operations', description: 'Health, metrics and this document.' },
      { name: 'console', description: 'The admin console in the browser (`--no-console` turns it off).' },
    ],
    paths,
    components: {
      schemas: userSchema === undefined ? SCHEMAS : { ...SCHEMAS, ...userSchemas(userSchema) },
      parameters: PARAMETERS,
      headers: HEADERS,
      responses,
      securitySchemes: SECURITY_SCHEMES,
    },
  };
}

/** Where the schema of the users' fields sits in the document. */
const USER_FIELDS = 'UserFields';

/**
 * `User` as the fixed rules and the operator's schema (`UserFields`), its
 * local references (`#/$defs/...`, `#`) rewritten to point into it where it sits.
 */
function userSchemas(setting: SchemaSetting): Json {
  const at = `#/components/schemas/${USER_FIELDS}`;
  const relocated = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(relocated);
    if (typeof node !== 'object' || node === null) return node;
    const out: Json = {};
    for (const [name, value] of Object.entries(node))
      if (DATA_KEYWORDS.has(name)) out[name] = value;
      else if (name === '$ref' && typeof value === 'string' && value.startsWith('#')) out[name] = at + value.slice(1);
      else out[name] = relocated(value);
    return out;
  };
  return {
    User: {
      description: `${USER_DESCRIPTION} Every write must also fit the schema of the users' fields the operator set (\`${USER_FIELDS}\`), or is answered 422 \`invalid-user\` with \`errors\`.`,
      allOf: [USER_RULES, schema(USER_FIELDS)],
    },
    [USER_FIELDS]: relocated(setting.document),
  };
}

/** Keywords whose values are data, not schemas: a `$ref` member there is not a reference. */
const DATA_KEYWORDS = new Set(['const', 'enum', 'default', 'examples']);

const USER_DESCRIPTION = `Any JSON object with a \`name\`; other fields are kept and returned as given. No key \`__proto__\`, \`constructor\` or \`prototype\` at any depth; at most ${MAX_DEPTH} levels of nesting.`;

/** The rules every user follows, with or without a schema of its fields. */
const USER_RULES = {
  type: 'object',
  required: ['name'],
  properties: {
    name: {
      type: 'string',
      minLength: 1,
      maxLength: NAME_MAX_LENGTH,
      description: 'No control characters; length in Unicode code points.',
    },
    id: {
      type: 'integer',
      minimum: 1,
      maximum: Number.MAX_SAFE_INTEGER,
      description: "Assigned by the server; in a request body optional, and must equal the target's id.",
    },
  },
  additionalProperties: true,
};

const SCHEMAS: Json = {
  User: { ...USER_RULES, description: USER_DESCRIPTION },
  UserPage: {
    type: 'object',
    required: ['items', 'next'],
    properties: {
      items: { type: 'array', items: schema('User') },
      aliases: {
        type: 'object',
        additionalProperties: { type: 'string' },
        description: 'Only with `aliases=true`: listed id (as a string) -> alias, for the users that have one.',
        examples: [{ '1': 'alice' }],
      },
      next: {
        type: ['string', 'null'],
        description:
          'The path of the next page (the same query with the cursor of where this page ends), or null on the last page.',
        examples: ['/users?after=2&limit=2'],
      },
      total: {
        type: 'integer',
        minimum: 0,
        description: 'Only with `count=true`: the number of users the filter matches, all pages together.',
      },
    },
  },
  FieldDeclarations: {
    type: 'object',
    required: ['items'],
    properties: {
      items: {
        type: 'array',
        items: {
          type: 'object',
          required: ['path', 'unique', 'caseInsensitive'],
          properties: {
            path: { type: 'string', description: "A filter's path: names joined by dots.", examples: ['email'] },
            unique: { type: 'boolean', description: 'No two users hold equal values there.' },
            caseInsensitive: {
              type: 'boolean',
              description: 'Its strings compare lowercased in filters, sorts and uniqueness.',
            },
          },
        },
      },
    },
    examples: [{ items: [{ path: 'email', unique: true, caseInsensitive: true }] }],
  },
  Reservation: {
    type: 'object',
    required: ['id', 'expiresAt'],
    properties: {
      id: { type: 'integer', minimum: 1 },
      expiresAt: { type: 'string', format: 'date-time', description: 'RFC 3339, UTC, milliseconds.' },
    },
  },
  TokenRequest: {
    type: 'object',
    required: ['name'],
    additionalProperties: false,
    properties: {
      name: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,64}$', description: 'Unique among the tokens.' },
      role: { enum: ['admin', 'reader'], default: 'reader' },
      expiresIn: {
        type: 'integer',
        minimum: 1,
        maximum: MAX_TOKEN_LIFETIME,
        description: 'Seconds until it expires; absent: it never does.',
      },
    },
  },
  Token: {
    type: 'object',
    required: ['id', 'name', 'role', 'actsAs', 'createdBy', 'createdWith', 'createdAt', 'expiresAt', 'expired'],
    properties: {
      id: { type: 'string', pattern: '^[0-9a-f]{16}$' },
      name: { type: 'string' },
      role: { enum: ['admin', 'reader'], description: 'The role it was made with.' },
      actsAs: {
        enum: ['admin', 'reader', null],
        description:
          "What it may do now: the lesser of `role` and its account's role; null once its account was removed (it is refused).",
      },
      createdBy: {
        type: 'string',
        description: 'The account it belongs to: the one that created it, or that created the token that did.',
      },
      createdWith: {
        type: ['string', 'null'],
        pattern: '^[0-9a-f]{16}$',
        description:
          'The id of the token that created it, or null when a session did. Revoking that token revokes this one.',
      },
      createdAt: { type: 'string', format: 'date-time' },
      expiresAt: { type: ['string', 'null'], format: 'date-time' },
      expired: { type: 'boolean' },
    },
  },
  NewToken: {
    allOf: [
      schema('Token'),
      {
        type: 'object',
        required: ['token'],
        properties: {
          token: {
            type: 'string',
            pattern: '^ust_[0-9a-f]{16}\\.[A-Za-z0-9_-]{43}$',
            description: 'The secret: shown here only.',
          },
        },
      },
    ],
  },
  Health: { type: 'object', required: ['status'], properties: { status: { const: 'ok' } } },
  Ready: { type: 'object', required: ['status'], properties: { status: { const: 'ready' } } },
  Problem: {
    type: 'object',
    description:
      'RFC 9457 problem details. `type` is a tag URI (RFC 4151) naming the kind of error; see `x-problem-types`.',
    required: ['type', 'title', 'status', 'detail'],
    properties: {
      type: { type: 'string', format: 'uri', examples: [problemType(problems.notFound)] },
      title: { type: 'string', description: 'Fixed per type.' },
      status: { type: 'integer' },
      detail: { type: 'string', description: 'This occurrence; wording may change.' },
      field: {
        type: 'string',
        description:
          '`invalid-user` and `invalid-token-request`: the path of the offending value, "" for the body itself; `unique-violation`: the declared unique path.',
      },
      conflictsWith: {
        type: 'string',
        description: '`unique-violation` only: the URI of the user that holds the value.',
        examples: ['/users/7'],
      },
      keyword: {
        type: 'string',
        description:
          "`invalid-user` by the schema of the users' fields: the JSON Schema keyword of the first violation.",
        examples: ['format'],
      },
      errors: {
        type: 'array',
        description: "`invalid-user` by the schema of the users' fields: every violation of the write.",
        items: {
          type: 'object',
          required: ['field', 'keyword', 'detail'],
          properties: { field: { type: 'string' }, keyword: { type: 'string' }, detail: { type: 'string' } },
        },
      },
      parameter: {
        type: 'string',
        description: '`invalid-query` only: the parameter, such as `limit`, `after` or `sort`.',
      },
      column: {
        type: 'integer',
        minimum: 1,
        description: '`invalid-filter` only: the column (1-based, in characters) where the filter stops parsing.',
      },
    },
    'x-problem-types': Object.values(problems).map((k) => ({ type: problemType(k), status: k.status, title: k.title })),
  },
};

const stringHeader = (description: string, extra: Json = {}): Json => ({
  description,
  schema: { type: 'string', ...extra },
});

const PARAMETERS: Json = {
  ref: {
    name: 'ref',
    in: 'path',
    required: true,
    description: `An id (canonical decimal, 1..2^53-1) or an alias (1..${ALIAS_MAX_LENGTH} of \`A-Z a-z 0-9 . _ ~ -\`, at least one non-digit, not \`new\`, not \`.\` or \`..\`).`,
    schema: { type: 'string' },
  },
  limit: {
    name: 'limit',
    in: 'query',
    description: 'Page size.',
    schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
  },
  after: {
    name: 'after',
    in: 'query',
    description:
      'List users with ids above this one. With `filter` or `sort`: the opaque cursor of a `next`, valid only with the same filter and sort (else 400 `invalid-cursor`).',
    schema: { type: 'string', examples: ['2'] },
  },
  filter: {
    name: 'filter',
    in: 'query',
    description: `A SCIM filter (RFC 7644 section 3.4.2.2) over the users' JSON: \`name eq "Ann" and age ge 30\`, \`emails[type eq "work"]\`, \`email pr\`. At most ${MAX_FILTER_LENGTH} characters, ${MAX_FILTER_CONDITIONS} conditions, ${MAX_FILTER_DEPTH} levels of nesting. One that does not parse: 400 \`invalid-filter\`, whose \`detail\` names the column and what was expected there.`,
    schema: { type: 'string', maxLength: MAX_FILTER_LENGTH },
  },
  sort: {
    name: 'sort',
    in: 'query',
    description: `Up to ${MAX_SORT_KEYS} comma-separated paths, each optionally after \`-\` (descending): \`-age,name\`. Missing, null, array and object members sort last in both directions; ties go by ascending id. Not paths: 400 \`invalid-query\` with \`parameter: "sort"\`.`,
    schema: { type: 'string' },
  },
  count: {
    name: 'count',
    in: 'query',
    description:
      '`true`: the page also carries `total`, the number of users the filter matches over all pages. It costs a full evaluation of the filter over every user.',
    schema: { const: 'true' },
  },
  aliases: {
    name: 'aliases',
    in: 'query',
    description:
      '`true`: the page also carries `aliases`, each listed id that has an alias mapped to it (what an export needs to rebuild the users); `next` keeps the parameter.',
    schema: { const: 'true' },
  },
  'If-Match': {
    name: 'If-Match',
    in: 'header',
    description: 'Strong comparison; `*` matches any existing user.',
    schema: { type: 'string' },
  },
  'If-None-Match': {
    name: 'If-None-Match',
    in: 'header',
    description: 'Weak comparison on GET (304); on PUT, a match or `*` on an existing user is 412.',
    schema: { type: 'string' },
  },
  Prefer: {
    name: 'Prefer',
    in: 'header',
    description:
      'PUT: `return=minimal` answers 204 without a body. DELETE: `return=representation` answers 200 with the user as it was.',
    schema: { type: 'string' },
  },
  'Idempotency-Key': {
    name: 'Idempotency-Key',
    in: 'header',
    description: '1..255 visible ASCII characters.',
    schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' },
  },
  'X-Request-Id': {
    name: 'X-Request-Id',
    in: 'header',
    description: 'Echoed in the response when it is 1..128 of `A-Z a-z 0-9 . _ : -`; otherwise the server makes one.',
    schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
  },
};

const HEADERS: Json = {
  'X-Request-Id': stringHeader(
    "The id of this exchange in the access log: the request's own when sane, else generated.",
  ),
  ETag: stringHeader('Strong entity tag of the representation.'),
  Location: stringHeader('The URI of the user, e.g. `/users/1`.'),
  'Content-Location': stringHeader("The user's canonical URI, `/users/{id}`."),
  'Set-Cookie': stringHeader(
    `The \`${SESSION_COOKIE}\` session cookie: \`Path=/; HttpOnly; SameSite=Lax; Max-Age=...\`; with \`--cookie-secure\` it is named \`__Host-${SESSION_COOKIE}\` and also \`Secure\`.`,
  ),
  'WWW-Authenticate': stringHeader(
    `Missing credentials: \`Cookie realm="users", cookie-name="${SESSION_COOKIE}", form-action="${LOGIN_PATH}", Bearer realm="users"\` (\`GET /\`: the Cookie challenge alone); ` +
      `a bad API token: \`Bearer realm="users", error="invalid_token"\`; a failed login: \`Basic realm="users"\`.`,
  ),
  'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Policy': stringHeader('The rate limit policy (IETF httpapi RateLimit header fields draft).'),
  RateLimit: stringHeader('The remaining quota and its reset (IETF httpapi RateLimit header fields draft).'),
  'Idempotent-Replayed': stringHeader('`true` when the response replays the one kept for the Idempotency-Key.', {
    const: 'true',
  }),
  'Preference-Applied': stringHeader('The `return` preference honoured.', {
    enum: ['return=minimal', 'return=representation'],
  }),
};

const SECURITY_SCHEMES: Json = {
  session: {
    type: 'apiKey',
    in: 'cookie',
    name: SESSION_COOKIE,
    description:
      'The signed session cookie set by `POST /login`, named `__Host-' +
      SESSION_COOKIE +
      '` with `--cookie-secure`. Which requests need it depends on `--require-session`.',
  },
  basic: { type: 'http', scheme: 'basic', description: '`POST /login` only.' },
  bearer: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'ust_<16 hex digits>.<43 base64url characters>',
    description:
      'An API token made with `POST /tokens` (`usersctl tokens create`): accepted wherever a session is, with the token\'s role. Wrong, expired or revoked: 401 `invalid-token` with `WWW-Authenticate: Bearer realm="users", error="invalid_token"`.',
  },
};
