/** Names both the server and usersctl must agree on. */
export const SESSION_COOKIE = 'USER_TOKEN';
/**
 * The session cookie's name on the wire: with --cookie-secure, `__Host-`
 * prefixed (RFC 6265bis section 4.1.3.2), so a browser keeps it only when
 * it is Secure, for this host alone and `Path=/`, and no sibling subdomain
 * can set one in its place.
 */
export function sessionCookieName(secure: boolean): string {
  return secure ? `__Host-${SESSION_COOKIE}` : SESSION_COOKIE;
}
export const USERS_PATH = '/users';
export const NEW_USER_PATH = '/users/new';
export const RESERVATIONS_PATH = '/reservations';
export const LOGIN_PATH = '/login';
export const LOGOUT_PATH = '/logout';
export const HEALTH_PATH = '/healthz';
export const METRICS_PATH = '/metrics';
export const CHANGES_PATH = '/changes';
export const INDEXES_PATH = '/indexes';

export function userPath(id: number): string {
  return `${USERS_PATH}/${id}`;
}

export const TOKENS_PATH = '/tokens';
/** An API token's name: what `accounts` allows for an account name. */
export const TOKEN_NAME = /^[A-Za-z0-9._-]{1,64}$/;
/** The longest lifetime a token may be given, in seconds: ten years. */
export const MAX_TOKEN_LIFETIME = 10 * 366 * 86_400;

/** A token lifetime like 90d, 12h, 30m, 3600s or 2w, in seconds; undefined when the text is not one. */
export function parseLifetime(text: string): number | undefined {
  const match = /^([1-9][0-9]{0,9})([smhdw])$/.exec(text);
  if (match === null) return undefined;
  return Number(match[1]) * LIFETIME_UNITS[match[2] as keyof typeof LIFETIME_UNITS];
}

const LIFETIME_UNITS = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 } as const;
