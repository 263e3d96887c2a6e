/** Names both the server and usersctl must agree on. */
export const SESSION_COOKIE = 'USER_TOKEN';
export const USERS_PATH = '/users';
export const NEW_USER_PATH = '/users/new';
export const RESERVATIONS_PATH = '/reservations';
export const LOGIN_PATH = '/login';
export const LOGOUT_PATH = '/logout';
export const HEALTH_PATH = '/healthz';

export function userPath(id: number): string {
  return `${USERS_PATH}/${id}`;
}
