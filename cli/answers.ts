/**
 * What usersctl reads from an answer of users-server: its one header value,
 * its JSON object or user, its problem document and the one line that says
 * what failed; the one reader of an answer's JSON, so an answer that is not
 * users-server's is refused the same way everywhere.
 */
import { PROBLEM_CONTENT_TYPE, problems, problemType } from '../shared/problems.js';
import { isId } from '../shared/user.js';
import { StatusError, UnexpectedAnswerError, type Violation } from './exit-codes.js';

export interface Response {
  status: number;
  statusText: string;
  /** Lower-case names, as undici gives them. */
  headers: Record<string, string | string[] | undefined>;
  /** The whole body, always read so the connection can be reused. */
  text: string;
}

/** The server's detail for a path it does not route (http/response.ts). */
const NO_ROUTE = 'There is nothing at this path.';

/** The server's hints name HTTP requests; usersctl names its own commands for them. */
const HTTP_HINTS: readonly (readonly [RegExp, string])[] = [
  [/reserve one with POST \/reservations/, 'reserve one with `usersctl reserve`'],
];

/** The JSON object `text` holds; `what` names it in the sentence when it is not one. */
export function jsonObject(text: string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new UnexpectedAnswerError(`${what} that is not JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new UnexpectedAnswerError(`${what} that is not a JSON object`);
  return value as Record<string, unknown>;
}

/** The user a 2xx answer carries: a JSON object with an id, or UnexpectedAnswerError. */
export function answerUser(response: Response): Record<string, unknown> & { id: number } {
  const user = jsonObject(response.text, 'a user');
  if (!isId(user.id)) throw new UnexpectedAnswerError('a user without an id');
  return user as Record<string, unknown> & { id: number };
}

/** The parsed problem document of an `application/problem+json` answer, if it is one. */
export function problemOf(response: Response): Record<string, unknown> | undefined {
  const type = single(response.headers['content-type'])?.split(';')[0]?.trim().toLowerCase();
  if (type !== PROBLEM_CONTENT_TYPE) return undefined;
  try {
    const doc: unknown = JSON.parse(response.text);
    return typeof doc === 'object' && doc !== null && !Array.isArray(doc)
      ? (doc as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The one line to show for a failed answer: the problem's `detail` (else
 * its `title`), a JSON string body such as GET /'s "not authorized", or the
 * status line with what to check.
 */
export function detailOf(response: Response): string {
  return problemText(response) ?? jsonString(response.text) ?? statusLine(response);
}

/** The problem's `detail`, else its `title`, as one line; undefined when neither says anything. */
function problemText(response: Response): string | undefined {
  const problem = problemOf(response);
  const taken = problem === undefined ? undefined : takenValue(problem);
  if (taken !== undefined) return taken;
  for (const field of ['detail', 'title'] as const) {
    const value = problem?.[field];
    if (typeof value === 'string' && value.trim() !== '') return oneLine(value);
  }
  return undefined;
}

/**
 * A `unique-violation` in usersctl's words, naming the field and the user
 * that holds the value; undefined for another problem, or one without them.
 */
function takenValue(problem: Record<string, unknown>): string | undefined {
  const { type, field, conflictsWith } = problem;
  if (type !== problemType(problems.uniqueViolation) || typeof field !== 'string' || typeof conflictsWith !== 'string')
    return undefined;
  const holder = /^\/users\/(\d+)$/.exec(conflictsWith)?.[1] ?? oneLine(conflictsWith);
  return oneLine(`user ${holder} already holds this value of ${field}, which the server declares unique`);
}

/** A body that is a JSON string with something in it, as one line. */
function jsonString(text: string): string | undefined {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'string' && value.trim() !== '') return oneLine(value);
  } catch {
    // not JSON: the status line says it
  }
  return undefined;
}

/**
 * The status line of an answer that is not users-server's (it always sends
 * a problem document): something else answered at --url.
 */
function statusLine(response: Response): string {
  const next =
    response.status >= 500
      ? 'try again later, or check what stands between usersctl and users-server (a proxy)'
      : 'check that --url is the address of users-server';
  return `${`the server answered ${response.status} ${oneLine(response.statusText)}`.trimEnd()}; ${next}`;
}

/**
 * A StatusError for a failed answer, with the problem's detail as its
 * message, said in usersctl's terms; a path the server does not serve at
 * all names the URL asked (`url`): --url is then most likely wrong.
 */
export function statusError(response: Response, url?: string, path?: string): StatusError {
  const problem = problemOf(response);
  const text = (field: string) => (typeof problem?.[field] === 'string' ? (problem[field] as string) : undefined);
  const detail = detailOf(response);
  const elsewhere = url === undefined ? undefined : redirectElsewhere(response, url, path);
  const message =
    elsewhere ??
    (detail === NO_ROUTE && url !== undefined
      ? `there is nothing at ${url}: --url must be the server's address (it serves /users, /login, ...)`
      : inUsersctlTerms(detail));
  return new StatusError(response.status, message, text('type'), text('title'), undefined, violationsOf(problem));
}

/** The violations a 422 `invalid-user` lists (`errors`), those well formed; none for another problem. */
function violationsOf(problem: Record<string, unknown> | undefined): Violation[] {
  if (problem?.type !== problemType(problems.invalidUser) || !Array.isArray(problem.errors)) return [];
  return (problem.errors as unknown[]).flatMap((e) => {
    const { field, keyword, detail } = (e ?? {}) as Record<string, unknown>;
    return typeof field === 'string' && typeof keyword === 'string' && typeof detail === 'string'
      ? [{ field, keyword, detail }]
      : [];
  });
}

/**
 * A violation as one sentence that names its field: the server's detail, after the field when it does not start with
 * it.
 */
export function violationLine(violation: Violation): string {
  const field = violation.field === '' ? 'the user' : violation.field;
  const detail = oneLine(violation.detail);
  return oneLine(detail.startsWith(field) ? detail : `${field}: ${detail}`);
}

/**
 * A redirect of `url` (the request `path` under --url) to another origin,
 * which usersctl does not follow (the session and token are for --url's):
 * where it points, and the --url that would reach it when it keeps the path.
 */
function redirectElsewhere(response: Response, url: string, path: string | undefined): string | undefined {
  const location = single(response.headers.location);
  if (!isRedirect(response.status) || location === undefined) return undefined;
  let target: URL;
  try {
    target = new URL(location, url);
  } catch {
    return undefined;
  }
  if (target.origin === new URL(url).origin) return undefined;
  const at = target.pathname + target.search;
  const base =
    path !== undefined && at.endsWith(path) ? target.origin + at.slice(0, at.length - path.length) : undefined;
  const next =
    base === undefined ? 'point --url at users-server itself' : `if users-server is there, give --url ${base}`;
  return `${url} redirects to ${target.href} (${response.status}), another origin, which usersctl does not follow: ${next}`;
}

function inUsersctlTerms(detail: string): string {
  return HTTP_HINTS.reduce((text, [http, cli]) => text.replace(http, cli), detail);
}

/**
 * A server's text as one line for a terminal: line breaks become spaces, and
 * other control characters are shown as \xNN, so an answer cannot move the
 * cursor, retitle the window or hide what is printed (ESC sequences).
 */
export function oneLine(text: string): string {
  return text
    .replace(/[\r\n\t]+/g, ' ')
    .replace(/[\x00-\x1f\x7f-\x9f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`)
    .trim();
}

/** A header's value, the first of them when it came more than once. */
export function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The redirects usersctl follows within --url's origin. */
export function isRedirect(status: number): boolean {
  return status === 301 || status === 302 || status === 307 || status === 308;
}
