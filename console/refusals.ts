/** What a refused write says to the person: the server's words, and for a unique field, who holds the value. */
import { ApiError, userIdOfUri } from './api.js';
import { h } from './dom.js';

/**
 * A refusal as a paragraph. A unique-field conflict (409 `unique-violation`,
 * with `field` and `conflictsWith`) names the field and links the user that
 * holds the value; any other says the problem's detail.
 */
export function refusalOf(error: unknown): HTMLElement {
  // fetch fails with a TypeError when no answer came.
  if (!(error instanceof ApiError))
    return h(
      'p',
      {},
      error instanceof Error && !(error instanceof TypeError)
        ? error.message
        : 'The server could not be reached; try again.',
    );
  const holder = userIdOfUri(error.problem.conflictsWith);
  if (error.is('unique-violation') && holder !== undefined) {
    const field = typeof error.problem.field === 'string' ? error.problem.field : 'a unique field';
    return h(
      'p',
      {},
      `Another user already holds this value of ${field}, which is unique: `,
      h('a', { href: `#/users/${holder}` }, `user ${holder}`),
      '.',
    );
  }
  return h('p', {}, error.message);
}

/** The field a refusal names (422 `invalid-user`, 409 `unique-violation`), if any. */
export function fieldOf(error: unknown): string | undefined {
  return error instanceof ApiError && typeof error.problem.field === 'string' ? error.problem.field : undefined;
}
