/**
 * The catalog of every problem the API can answer (RFC 9457).
 * Each entry has a stable `type` URI, a status and a title. The server throws
 * these; usersctl maps their statuses to exit codes. `type` URIs are tag URIs
 * (RFC 4151): stable names that are not meant to be fetched.
 */
export const PROBLEM_TYPE_PREFIX = 'tag:users-server,2026:problem/';

export const problems = {
  badRequest: { code: 'bad-request', status: 400, title: 'Bad request' },
  invalidJson: { code: 'invalid-json', status: 400, title: 'Request body is not valid JSON' },
  invalidRef: { code: 'invalid-ref', status: 400, title: 'Malformed user reference' },
  invalidQuery: { code: 'invalid-query', status: 400, title: 'Malformed query parameter' },
  invalidHeader: { code: 'invalid-header', status: 400, title: 'Malformed request header' },
  invalidCursor: { code: 'invalid-cursor', status: 400, title: 'Not a cursor of this server' },
  invalidFilter: { code: 'invalid-filter', status: 400, title: 'Malformed filter' },
  unauthorized: { code: 'unauthorized', status: 401, title: 'A valid session or API token is required' },
  invalidToken: { code: 'invalid-token', status: 401, title: 'The API token is wrong, expired or revoked' },
  loginFailed: { code: 'login-failed', status: 401, title: 'Wrong or missing credentials' },
  forbidden: { code: 'forbidden', status: 403, title: 'The session or token may not do this' },
  notFound: { code: 'not-found', status: 404, title: 'No such resource' },
  methodNotAllowed: { code: 'method-not-allowed', status: 405, title: 'Method not allowed' },
  idConflict: { code: 'id-conflict', status: 409, title: 'The id in the body does not fit the target' },
  idempotencyInProgress: {
    code: 'idempotency-in-progress',
    status: 409,
    title: 'A request with this Idempotency-Key is in progress',
  },
  tokenNameTaken: { code: 'token-name-taken', status: 409, title: 'An API token of this name exists' },
  uniqueViolation: { code: 'unique-violation', status: 409, title: 'Another user holds this value of a unique field' },
  gone: { code: 'gone', status: 410, title: 'The id was issued but its user is gone' },
  changesExpired: { code: 'changes-expired', status: 410, title: 'The changes after this cursor are no longer kept' },
  preconditionFailed: { code: 'precondition-failed', status: 412, title: 'Precondition failed' },
  requestTimeout: { code: 'request-timeout', status: 408, title: 'Request timeout' },
  payloadTooLarge: { code: 'payload-too-large', status: 413, title: 'Request body too large' },
  unsupportedMediaType: {
    code: 'unsupported-media-type',
    status: 415,
    title: 'Unsupported media type of the request body',
  },
  misdirectedRequest: {
    code: 'misdirected-request',
    status: 421,
    title: 'The request names a host that is not this server',
  },
  invalidUser: { code: 'invalid-user', status: 422, title: 'The user breaks a validation rule' },
  invalidTokenRequest: { code: 'invalid-token-request', status: 422, title: 'The API token request breaks a rule' },
  idempotencyKeyReused: {
    code: 'idempotency-key-reused',
    status: 422,
    title: 'Idempotency-Key reused with a different request',
  },
  preconditionRequired: { code: 'precondition-required', status: 428, title: 'If-Match is required' },
  tooManyRequests: { code: 'too-many-requests', status: 429, title: 'Too many requests' },
  requestHeaderFieldsTooLarge: { code: 'headers-too-large', status: 431, title: 'Request header fields too large' },
  uriTooLong: { code: 'uri-too-long', status: 414, title: 'Request target too long' },
  internal: { code: 'internal', status: 500, title: 'Internal server error' },
  notImplemented: { code: 'not-implemented', status: 501, title: 'Not implemented' },
  idSpaceExhausted: { code: 'id-space-exhausted', status: 503, title: 'No more ids can be issued' },
  tooManyReservations: { code: 'too-many-reservations', status: 503, title: 'Too many live reservations' },
  storeUnavailable: { code: 'store-unavailable', status: 503, title: 'The store is unavailable; retry shortly' },
  diskFull: { code: 'disk-full', status: 503, title: 'The disk is full; the write was not made' },
  notReady: { code: 'not-ready', status: 503, title: 'This instance is not ready to serve' },
  loginBusy: { code: 'login-busy', status: 503, title: 'Too many logins are being checked; retry shortly' },
} as const satisfies Record<string, ProblemKind>;

export interface ProblemKind {
  readonly code: string;
  readonly status: number;
  readonly title: string;
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

export function problemType(kind: ProblemKind): string {
  return PROBLEM_TYPE_PREFIX + kind.code;
}
