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

export function userPath(id: number): string {
  return `${USERS_PATH}/${id}`;
}
