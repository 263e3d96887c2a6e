/**
 * The console's one way to the API: every request, its answer as JSON, and
 * a refusal as an ApiError holding the problem document (RFC 9457). Paths
 * are resolved against the folder of the page, so the console works behind
 * a proxy that serves the server under a path prefix: /console's API is
 * /users, /prefix/console's is /prefix/users.
 */
import { PROBLEM_TYPE_PREFIX } from '../shared/problems.js';

/** A problem document, with its extension members. */
interface Problem {
  readonly type?: string;
  readonly title?: string;
  readonly status?: number;
  readonly detail?: string;
  readonly [member: string]: unknown;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem,
  ) {
    super(problem.detail ?? problem.title ?? `The server answered ${status}.`);
  }

  /** Whether the problem is of this catalog code (shared/problems.ts). */
  is(code: string): boolean {
    return this.problem.type === PROBLEM_TYPE_PREFIX + code;
  }
}

/** The server's root as the page reaches it: the folder /console is in. */
const ROOT = new URL('./', document.baseURI);

/** The URL of an API path, one the server wrote (`/users?after=2`) or a relative one (`users`). */
export function apiUrl(path: string): string {
  return new URL(path.replace(/^\/+/, ''), ROOT).href;
}

/** The id of a user URI the server wrote (`/users/7`, a Location, a conflictsWith); undefined for another. */
export function userIdOfUri(uri: unknown): number | undefined {
  const match = typeof uri === 'string' ? /\/users\/(\d+)$/.exec(uri) : null;
  return match === null ? undefined : Number(match[1]);
}

interface Answer<T> {
  readonly status: number;
  readonly headers: Headers;
  readonly body: T;
}

interface CallOptions {
  /** A body to send as application/json. */
  readonly json?: unknown;
  readonly headers?: Record<string, string>;
}

let sessionEnded: (() => void) | undefined;
/** The requests whose 401 is their answer (no session yet, a wrong password), not a session that ended. */
const SIGN_IN_PATHS = ['login', 'console/session'];

/** What to do when a request is answered 401: the session expired, was signed out elsewhere or its account removed. */
export function onSessionEnded(handler: () => void): void {
  sessionEnded = handler;
}

/**
 * Sends a request and reads its answer; any status from 400 on is thrown
 * as an ApiError. The session cookie goes along by itself (HttpOnly: the
 * script never sees it), and so do Origin and Sec-Fetch-Site, which is all
 * the API's cross-site check asks of a write from this page.
 */
export async function call<T = unknown>(method: string, path: string, options: CallOptions = {}): Promise<Answer<T>> {
  const headers: Record<string, string> = { Accept: 'application/json', ...options.headers };
  let body: string | undefined;
  if (options.json !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(options.json);
  }
  const response = await fetch(apiUrl(path), { method, headers, body, credentials: 'same-origin', cache: 'no-cache' });
  const text = response.status === 204 || method === 'HEAD' ? '' : await response.text();
  const parsed = parseJson(text);
  if (response.status >= 400) {
    if (response.status === 401 && !SIGN_IN_PATHS.includes(path)) sessionEnded?.();
    const problem = typeof parsed === 'object' && parsed !== null ? (parsed as Problem) : {};
    throw new ApiError(response.status, { status: response.status, ...problem });
  }
  return { status: response.status, headers: response.headers, body: parsed as T };
}

function parseJson(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** A random key for Idempotency-Key: crypto.randomUUID needs a secure context, getRandomValues does not. */
export function idempotencyKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}
