/**
 * Who is signed in, signing in with the console's own form (the API's
 * `POST /login` with Basic credentials: no `--login-page` needed), and
 * signing out (`POST /logout`, which revokes the session on the server).
 */
import { ApiError, call } from './api.js';
import { h, replace } from './dom.js';

export interface Session {
  /** The account's name (a token's name, for a request with one). */
  readonly name: string;
  readonly account: string;
  readonly role: 'admin' | 'reader';
}

/** The session the page's cookie holds; undefined when there is none (401). */
export async function currentSession(): Promise<Session | undefined> {
  try {
    return (await call<Session>('GET', 'console/session')).body;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return undefined;
    throw error;
  }
}

/** `user:password` as the Basic scheme carries it: UTF-8, then base64 (RFC 7617). */
function basicCredentials(user: string, password: string): string {
  const bytes = new TextEncoder().encode(`${user}:${password}`);
  return `Basic ${btoa(Array.from(bytes, (b) => String.fromCharCode(b)).join(''))}`;
}

export async function signOut(): Promise<void> {
  await call('POST', 'logout');
}

/** What a refused sign-in says to the person. */
function refusalText(error: unknown): string {
  if (!(error instanceof ApiError)) return 'The server could not be reached; try again.';
  if (error.status === 401) return 'The user name or password is wrong.';
  return error.message;
}

/**
 * Shows the sign-in form in `main`; `signedIn` is called with the session
 * once a sign-in succeeds. `notice` says why the form is shown, when it is
 * not the first visit (a session that ended).
 */
export function showSignIn(main: HTMLElement, notice: string | undefined, signedIn: (session: Session) => void): void {
  const error = h('p', { class: 'error', id: 'sign-in-error', role: 'alert', hidden: true });
  const user = h('input', {
    id: 'username',
    name: 'username',
    autocomplete: 'username',
    autocapitalize: 'none',
    spellcheck: 'false',
    required: true,
  });
  const password = h('input', {
    id: 'password',
    name: 'password',
    type: 'password',
    autocomplete: 'current-password',
    required: true,
  });
  const button = h('button', { type: 'submit' }, 'Sign in');
  const submit = async (event: Event) => {
    event.preventDefault();
    button.disabled = true;
    error.hidden = true;
    try {
      await call('POST', 'login', { headers: { Authorization: basicCredentials(user.value, password.value) } });
      const session = await currentSession();
      if (session === undefined) throw new ApiError(401, {});
      signedIn(session);
    } catch (refusal) {
      replace(error, refusalText(refusal));
      error.hidden = false;
      for (const input of [user, password]) {
        input.setAttribute('aria-invalid', 'true');
        input.setAttribute('aria-describedby', 'sign-in-error');
      }
      password.value = '';
      password.focus();
    } finally {
      button.disabled = false;
    }
  };
  const heading = h('h1', { tabindex: -1 }, 'Sign in');
  replace(
    main,
    h(
      'section',
      { class: 'sign-in' },
      heading,
      notice !== undefined && h('p', { class: 'notice', role: 'status' }, notice),
      error,
      h(
        'form',
        { method: 'post', action: 'login', on: { submit } },
        h('label', { for: 'username' }, 'User name'),
        user,
        h('label', { for: 'password' }, 'Password'),
        password,
        button,
      ),
    ),
  );
  document.title = 'Sign in · users-server';
  user.focus();
}
