/**
 * usersctl's HTTP client: one keep-alive undici Agent per process, the
 * cookie jar on every request, retries where they are safe, `-v` tracing
 * with secrets masked, and the problem `detail` of a failed answer.
 */
import { constants } from 'node:fs';
import { access, copyFile } from 'node:fs/promises';
import type { Agent, Dispatcher } from 'undici';
import type { CookieJar } from 'tough-cookie';
import { PROBLEM_CONTENT_TYPE, PROBLEM_TYPE_PREFIX, problems } from '../shared/problems.js';
import { isId } from '../shared/user.js';
import { CliError, EXIT, NetworkError, StatusError, UnexpectedAnswerError } from './exit-codes.js';
import { fileProblem } from '../shared/file-errors.js';
import { cookieKey, loadJar, saveJar, type SetBy } from './jar.js';
import { STOP_EXIT, type Interruption } from './streams.js';

export type Method = 'GET' | 'HEAD' | 'PUT' | 'DELETE' | 'POST';

export interface Request {
  method: Method;
  /** Path and query, starting with `/`; appended to the base URL's path. */
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export interface Response {
  status: number;
  statusText: string;
  /** Lower-case names, as undici gives them. */
  headers: Record<string, string | string[] | undefined>;
  /** The whole body, always read so the connection can be reused. */
  text: string;
}

export interface ClientOptions {
  baseUrl: URL;
  /** Connect, response-headers and whole-answer timeout (a followed feed's: between chunks). */
  timeoutMs: number;
  /** Extra attempts after the first, where retrying is safe. */
  retries: number;
  jarPath: string;
  /** An API token: sent as `Authorization: Bearer` on every request, and the cookie jar is left alone. */
  token?: string | undefined;
  /** Called with one line per traced header or event (`-v`); undefined: no tracing. */
  trace?: ((line: string) => void) | undefined;
  /** Non-fatal messages (cookie-jar warnings). */
  warn: (message: string) => void;
  /** What stops the command (Ctrl-C): a wait before a retry ends, and no retry follows. */
  interruption?: Pick<Interruption, 'reason' | 'label' | 'onStop'>;
}

// Retry policy (docs/cli.md "Retries").
const BACKOFF_BASE_MS = 100;
const BACKOFF_CAP_MS = 5_000;
const RETRY_AFTER_CAP_MS = 30_000;
const MAX_REDIRECTS = 10;
/** Jar lines skipped that are each named on stderr; the rest are counted in one line. */
const MAX_JAR_WARNINGS = 3;
/** Statuses that say "try again" without saying the request was wrong. */
const RETRYABLE_STATUS: ReadonlySet<number> = new Set([408, 429, 502, 503, 504]);
/** Methods whose repetition is harmless (RFC 9110 section 9.2.2). */
const IDEMPOTENT: ReadonlySet<Method> = new Set(['GET', 'HEAD', 'PUT', 'DELETE']);
/** Failures before a connection exists: the request never left, so even a bare POST may be resent. */
const NOT_SENT_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
]);
/** undici errors that are bugs in the caller, not the network. */
const PROGRAMMING_CODES: ReadonlySet<string> = new Set([
  'UND_ERR_INVALID_ARG',
  'UND_ERR_INVALID_RETURN_VALUE',
  'UND_ERR_NOT_SUPPORTED',
]);
const IN_PROGRESS_TYPE = PROBLEM_TYPE_PREFIX + problems.idempotencyInProgress.code;
/** How long a computed Cookie header is reused before the jar is asked again (expiry is in seconds). */
const COOKIE_CACHE_MS = 1_000;

/**
 * undici's Agent and its request(), loaded at the first request from their
 * own files rather than undici's index, which also loads fetch, WebSocket,
 * the cache and the mock agent: 27 ms instead of 69 at every start
 * (docs/performance.md "usersctl start-up"). The index would add request()
 * to every dispatcher; here it is called on the Agent. The files are
 * undici's CommonJS modules (the lockfile pins the version; the tests run
 * every command through them): Node's import gives their exports as the
 * default export, as does the bundle of npm run build.
 */
let agentRequest: Agent['request'];

async function loadAgent(): Promise<typeof Agent> {
  const [agentModule, apiModule] = await Promise.all([
    // @ts-expect-error undici's own files carry no type declarations; their shapes are its Agent and request().
    import('undici/lib/dispatcher/agent.js') as Promise<{ default: typeof Agent }>,
    // @ts-expect-error as above
    import('undici/lib/api/index.js') as Promise<{ default: { request: Agent['request'] } }>,
  ]);
  agentRequest = apiModule.default.request;
  return agentModule.default;
}

/** What `HttpClient.stream` does with an answer that streams. */
export interface StreamHandlers {
  onHeaders(headers: Response['headers']): void;
  onChunk(text: string): void | Promise<void>;
  /** ms a body may stay silent. */
  idleMs: number;
  signal?: AbortSignal;
}

export class HttpClient {
  readonly origin: string;
  private readonly prefix: string;
  /** undici's Agent, loaded and made at the first request: a command that sends none never loads undici. */
  private agent: Promise<Agent> | undefined;
  /** True once the server answered anything in HTTP in this run: it is no HTTPS port. */
  private answered = false;
  private jarLoad: Promise<CookieJar> | undefined;
  private jarChanged = false;
  /** Lines of the jar file that were not cookies: kept aside before the file is rewritten without them. */
  private jarSkipped = 0;
  /** The server that set each cookie of the jar, where the jar file says. */
  private setBy: SetBy = new Map();
  private cookieCache: { key: string; value: string; at: number } | undefined;
  private pathSpecific: boolean | undefined;

  /** Ends the wait before a retry, once the command is stopped. */
  private wake: (() => void) | undefined;

  constructor(private readonly options: ClientOptions) {
    this.origin = options.baseUrl.origin;
    this.prefix = options.baseUrl.pathname.replace(/\/+$/, '');
    options.interruption?.onStop(() => this.wake?.());
  }

  private connections(): Promise<Agent> {
    this.agent ??= loadAgent().then((AgentClass) => new AgentClass({ connect: { timeout: this.options.timeoutMs } }));
    return this.agent;
  }

  /**
   * Sends a request, retrying where safe, following same-origin redirects
   * for everything but POST. Resolves with any HTTP answer; rejects with
   * NetworkError when no answer came after the retries.
   */
  async send(request: Request): Promise<Response> {
    const retryable = IDEMPOTENT.has(request.method) || request.headers?.['idempotency-key'] !== undefined;
    let path = this.prefix + request.path;
    let redirects = 0;
    for (let attempt = 0; ; attempt++) {
      const left = this.options.retries - attempt;
      let response: Response;
      try {
        response = await this.once(request, path);
      } catch (error) {
        if (!(error instanceof NetworkError)) throw error;
        const failure = error;
        if (left > 0 && (retryable || (failure.code !== undefined && NOT_SENT_CODES.has(failure.code)))) {
          await this.pause(attempt, undefined, failure.message);
          continue;
        }
        throw failure;
      }
      if (left > 0 && retryable && worthRetrying(request.method, response)) {
        const retryAfter = retryAfterMs(response.headers['retry-after']);
        // Waiting less than the server asked is pointless, and longer than
        // the cap is not what someone at a shell expects: report it now.
        if (retryAfter === undefined || retryAfter <= RETRY_AFTER_CAP_MS) {
          await this.pause(attempt, retryAfter, `${response.status} ${oneLine(response.statusText)}`.trim());
          continue;
        }
        this.options.trace?.(`* not retrying: Retry-After asks for more than ${RETRY_AFTER_CAP_MS / 1000} s`);
      }
      const location = single(response.headers.location);
      if (
        isRedirect(response.status) &&
        location !== undefined &&
        request.method !== 'POST' &&
        redirects < MAX_REDIRECTS
      ) {
        const target = new URL(location, this.origin + path);
        if (target.origin === this.origin) {
          redirects++;
          path = target.pathname + target.search;
          this.options.trace?.(`* following ${response.status} to ${path}`);
          attempt = -1;
          continue;
        }
      }
      return response;
    }
  }

  /** The full URL of `path` under --url (its path prefix included). */
  urlOf(path: string): string {
    return `${this.origin}${this.prefix}${path}`;
  }

  /** Sends and requires one of `ok`; any other status becomes a StatusError carrying the server's detail. */
  async expect(request: Request, ok: readonly number[]): Promise<Response> {
    const response = await this.send(request);
    if (!ok.includes(response.status)) throw statusError(response, this.urlOf(request.path), request.path);
    return response;
  }

  /** Writes the jar back now if a response set or cleared a cookie: `login` says where the session is only once it is there. */
  async saveJar(): Promise<void> {
    if (!this.jarChanged || this.jarLoad === undefined) return;
    const jar = await this.jarLoad;
    await this.keepSkippedLines();
    await saveJar(jar, this.options.jarPath, this.setBy).catch((error: unknown) => {
      throw new CliError(
        `the cookie jar: ${fileProblem('write', this.options.jarPath, error)} (or give another with --cookie-jar)`,
        EXIT.unexpected,
      );
    });
    this.jarChanged = false;
  }

  /**
   * Rewriting a jar drops the lines that were not cookies: the file as it
   * was is copied aside first (a --cookie-jar that named the wrong file
   * keeps its content), and a warning says where.
   */
  private async keepSkippedLines(): Promise<void> {
    if (this.jarSkipped === 0) return;
    const aside = `${this.options.jarPath}.before-${new Date().toISOString().replaceAll(':', '')}`;
    try {
      await copyFile(this.options.jarPath, aside, constants.COPYFILE_EXCL);
    } catch (error) {
      throw new CliError(
        `the cookie jar: it holds ${this.jarSkipped} lines that are not cookies and cannot be kept aside (${fileProblem('write', aside, error)}), so it was left as it was; give another --cookie-jar`,
        EXIT.unexpected,
      );
    }
    this.options.warn(
      `cookie jar ${this.options.jarPath}: the file as it was, with the ${this.jarSkipped} lines that are not cookies, is kept in ${aside}`,
    );
    this.jarSkipped = 0;
  }

  /** Writes the jar back when a response set or cleared a cookie, then closes the connections. */
  async close(): Promise<void> {
    try {
      await this.saveJar();
    } finally {
      if (this.agent !== undefined) await (await this.agent).close();
    }
  }

  /** The jar, loaded on first use; a missing file is an empty jar. */
  jar(): Promise<CookieJar> {
    this.jarLoad ??= loadJar(this.options.jarPath).then(
      ({ jar, warnings, setBy }) => {
        this.jarSkipped = warnings.length;
        this.setBy = setBy;
        // A file that is not a jar at all (a wrong --cookie-jar) would give a line per line of it.
        for (const warning of warnings.slice(0, MAX_JAR_WARNINGS))
          this.options.warn(`cookie jar ${this.options.jarPath}: ${warning}`);
        const more = warnings.length - MAX_JAR_WARNINGS;
        if (more > 0)
          this.options.warn(
            `cookie jar ${this.options.jarPath}: ${more} more line${more === 1 ? '' : 's'} skipped; is it the cookie file you meant to give?`,
          );
        return jar;
      },
      (error: unknown) => {
        throw new CliError(
          `the cookie jar: ${fileProblem('read', this.options.jarPath, error)} (or give another with --cookie-jar)`,
          EXIT.unexpected,
        );
      },
    );
    return this.jarLoad;
  }

  /**
   * Sends a request once (no retry: the caller reconnects) and, on a 200,
   * gives its headers to `onHeaders` and each chunk of the body to
   * `onChunk` as it comes (awaited: a slow output slows the reading),
   * resolving when the body ends (the text is then ''). Another status
   * resolves with its whole text. A body silent for `idleMs`, or the
   * `signal`, fails it as a network failure.
   */
  async stream(request: Request, handlers: StreamHandlers): Promise<Response> {
    const path = this.prefix + request.path;
    const headers = await this.credentials(this.origin + path, request.headers);
    try {
      const agent = await this.connections();
      const res = await agentRequest.call(agent, {
        origin: this.origin,
        path,
        method: request.method,
        headers,
        headersTimeout: this.options.timeoutMs,
        bodyTimeout: handlers.idleMs,
        ...(handlers.signal !== undefined && { signal: handlers.signal }),
      });
      this.answered = true;
      const response = { status: res.statusCode, statusText: res.statusText ?? '', headers: res.headers, text: '' };
      if (res.statusCode !== 200)
        return { ...response, text: await answerText(res, this.origin, this.options.timeoutMs) };
      handlers.onHeaders(res.headers);
      res.body.setEncoding('utf8');
      for await (const chunk of res.body) await handlers.onChunk(chunk as string);
      return response;
    } catch (error) {
      throw this.networkError(error);
    }
  }

  /** `headers` with the request's credentials: the API token, else the jar's cookies for `url`. */
  private async credentials(url: string, given: Record<string, string> | undefined): Promise<Record<string, string>> {
    const headers: Record<string, string> = { ...given };
    const token = this.options.token;
    if (token !== undefined) headers.authorization ??= `Bearer ${token}`;
    else {
      const cookie = await this.cookieHeader(url);
      if (cookie !== '') headers.cookie = cookie;
    }
    return headers;
  }

  private async once(request: Request, path: string): Promise<Response> {
    const url = this.origin + path;
    const headers = await this.credentials(url, request.headers);
    const token = this.options.token;
    const trace = this.options.trace;
    if (trace !== undefined) {
      trace(`> ${request.method} ${path} HTTP/1.1`);
      trace(`> host: ${new URL(this.origin).host}`);
      for (const [name, value] of Object.entries(headers)) trace(`> ${name}: ${maskRequestHeader(name, value)}`);
      if (request.body !== undefined) trace(`> content-length: ${Buffer.byteLength(request.body)}`);
      trace('>');
    }
    const timeout = this.options.timeoutMs;
    let res: Awaited<ReturnType<Agent['request']>>;
    let text: string;
    try {
      const agent = await this.connections();
      res = await agentRequest.call(agent, {
        origin: this.origin,
        path,
        method: request.method,
        headers,
        body: request.body ?? null,
        headersTimeout: timeout,
        bodyTimeout: timeout,
      });
      this.answered = true;
      text = await answerText(res, this.origin, timeout);
    } catch (error) {
      if (error instanceof CliError) throw error;
      throw this.networkError(error);
    }
    const response: Response = { status: res.statusCode, statusText: res.statusText ?? '', headers: res.headers, text };
    if (trace !== undefined) {
      trace(`< HTTP/1.1 ${response.status} ${oneLine(response.statusText)}`.trimEnd());
      for (const [name, value] of Object.entries(res.headers)) {
        for (const v of Array.isArray(value) ? value : [value ?? ''])
          trace(`< ${name}: ${oneLine(name === 'set-cookie' ? maskSetCookie(v) : v)}`);
      }
      trace('<');
    }
    if (token === undefined) await this.storeCookies(url, res.headers['set-cookie']);
    return response;
  }

  private async cookieHeader(url: string): Promise<string> {
    // No jar file and nothing stored yet: no cookies, and no need to load the cookie library.
    if (this.jarLoad === undefined && !(await exists(this.options.jarPath))) return '';
    const jar = await this.jar();
    // The Cookie header depends on the path only through cookies' Path
    // attributes; import sends 100,000 distinct paths, so while every cookie
    // has Path=/ one header serves the whole origin.
    this.pathSpecific ??= (await jar.serialize()).cookies.some((c) => typeof c.path === 'string' && c.path !== '/');
    const key = this.pathSpecific ? url : '';
    const now = Date.now();
    if (this.cookieCache !== undefined && this.cookieCache.key === key && now - this.cookieCache.at < COOKIE_CACHE_MS)
      return this.cookieCache.value;
    const value = await jar.getCookieString(url);
    this.cookieCache = { key, value, at: now };
    return value;
  }

  private async storeCookies(url: string, setCookie: string | string[] | undefined): Promise<void> {
    if (setCookie === undefined) return;
    const jar = await this.jar();
    for (const line of Array.isArray(setCookie) ? setCookie : [setCookie]) {
      // A cookie tough-cookie refuses (wrong domain, bad syntax) is skipped, as a browser would.
      const stored = await jar.setCookie(line, url, { ignoreError: true });
      if (stored === undefined) continue;
      this.jarChanged = true;
      this.noteSetter(cookieKey(stored), stored.key);
    }
    this.cookieCache = undefined;
    this.pathSpecific = undefined;
  }

  /** Notes that this server set the cookie `key`, and says so when it replaced one another server (another port of the host) had set. */
  private noteSetter(key: string, name: string): void {
    const server = this.options.baseUrl.href.replace(/\/$/, '');
    const before = this.setBy.get(key);
    this.setBy.set(key, server);
    if (before === undefined || before === server) return;
    this.options.warn(
      `${server} replaced the cookie ${name} that ${before} had set in ${this.options.jarPath}: cookies do not tell ports apart (RFC 6265 section 8.5), so a jar holds one session a host; give each server its own --cookie-jar FILE`,
    );
  }

  private async pause(attempt: number, retryAfter: number | undefined, why: string): Promise<void> {
    let delay: number;
    if (retryAfter !== undefined) {
      delay = retryAfter;
    } else {
      // Exponential backoff with jitter: half fixed, half random, so that
      // clients that failed together do not retry together.
      const ceiling = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt);
      delay = Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
    }
    const stopped = () => {
      const reason = this.options.interruption?.reason;
      if (reason !== undefined)
        throw new CliError(
          `${why}; stopped (${this.options.interruption?.label}) instead of trying again`,
          STOP_EXIT[reason],
        );
    };
    stopped();
    this.options.trace?.(`* ${why}; retry ${attempt + 1} of ${this.options.retries} in ${delay} ms`);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => ((this.wake = undefined), resolve()), delay);
      this.wake = () => (clearTimeout(timer), (this.wake = undefined), resolve());
    });
    stopped();
  }

  /**
   * A hint for a connection closed before a single byte came back over
   * http:// from a server that has answered nothing in this run: an HTTPS
   * server closes a connection that does not open with TLS, which is how
   * such a --url fails.
   */
  private perhapsHttps(error: unknown): string {
    const read = (error as { socket?: { bytesRead?: unknown } }).socket?.bytesRead;
    return this.origin.startsWith('http:') && read === 0 && !this.answered
      ? '; nothing came back: if the server speaks HTTPS there, use https:// in --url'
      : '';
  }

  private networkError(error: unknown): NetworkError {
    if (error instanceof NetworkError) return error;
    // Something answered, but not in HTTP/1.1 (an SSH or mail server, a raw socket): not a network failure to retry.
    if (hasName(error, 'HTTPParserError')) throw new UnexpectedAnswerError('not HTTP/1.1');
    const code = errorCode(error);
    if (code === 'UND_ERR_HEADERS_OVERFLOW')
      throw new UnexpectedAnswerError('header fields larger than usersctl reads (16 KiB)');
    if (code === undefined || PROGRAMMING_CODES.has(code)) throw error;
    const host = new URL(this.origin).host;
    const seconds = this.options.timeoutMs / 1000;
    switch (code) {
      case 'ECONNREFUSED':
        return new NetworkError(`cannot connect to ${this.origin}: connection refused`, code);
      case 'ENOTFOUND':
      case 'EAI_AGAIN':
        return new NetworkError(`cannot resolve the host name in ${this.origin}`, code);
      case 'UND_ERR_CONNECT_TIMEOUT':
        return new NetworkError(`cannot connect to ${this.origin}: no connection within ${seconds} s`, code);
      case 'UND_ERR_HEADERS_TIMEOUT':
      case 'UND_ERR_BODY_TIMEOUT':
      case 'ETIMEDOUT':
        return new NetworkError(`${host} did not answer within ${seconds} s`, code);
      case ANSWER_TIMEOUT:
        return new NetworkError(`${host} did not send its whole answer within ${seconds} s of its head`, code);
      case 'ECONNRESET':
      case 'EPIPE':
      case 'UND_ERR_SOCKET':
        return new NetworkError(
          `the connection to ${host} was closed before the answer was complete${this.perhapsHttps(error)}`,
          code,
        );
      case 'DEPTH_ZERO_SELF_SIGNED_CERT':
      case 'SELF_SIGNED_CERT_IN_CHAIN':
      case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
      case 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY':
        return new NetworkError(
          `the certificate of ${host} is not signed by an authority this machine trusts; if it is your own, set NODE_EXTRA_CA_CERTS to its CA's PEM file`,
          code,
        );
      case 'CERT_HAS_EXPIRED':
        return new NetworkError(`the certificate of ${host} has expired; the server must renew it`, code);
      case 'ERR_TLS_CERT_ALTNAME_INVALID':
        return new NetworkError(
          `the certificate of ${host} is for another host name; use the name it was issued for in --url`,
          code,
        );
      case 'EPROTO':
      case 'ERR_SSL_WRONG_VERSION_NUMBER':
      case 'ERR_SSL_PACKET_LENGTH_TOO_LONG':
        return new NetworkError(
          `${host} does not speak TLS on that port; try http:// instead of https:// in --url`,
          code,
        );
      default:
        return new NetworkError(`network error talking to ${host} (${code}); check --url and the server`, code);
    }
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * True when `response` says "not now" rather than "no" to a `method`
 * request that may be sent again: the statuses of the retry policy
 * (docs/cli.md "Retries"). Every retry of usersctl asks this, `watch`'s
 * reconnections too.
 */
export function worthRetrying(method: Method, response: Response): boolean {
  if (RETRYABLE_STATUS.has(response.status)) return true;
  // 500 may be a passing fault; repeating is harmless only for idempotent methods.
  if (response.status === 500) return IDEMPOTENT.has(method);
  // Our own earlier attempt (timed out on our side) is still running on the server.
  if (response.status === 409) return problemOf(response)?.type === IN_PROGRESS_TYPE;
  return false;
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
  return new StatusError(response.status, message, text('type'), text('title'));
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

/** The server's detail for a path it does not route (http/response.ts). */
const NO_ROUTE = 'There is nothing at this path.';

/** The server's hints name HTTP requests; usersctl names its own commands for them. */
const HTTP_HINTS: readonly (readonly [RegExp, string])[] = [
  [/reserve one with POST \/reservations/, 'reserve one with `usersctl reserve`'],
];

function inUsersctlTerms(detail: string): string {
  return HTTP_HINTS.reduce((text, [http, cli]) => text.replace(http, cli), detail);
}

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
  const problem = problemOf(response);
  for (const field of ['detail', 'title'] as const) {
    const value = problem?.[field];
    if (typeof value === 'string' && value.trim() !== '') return oneLine(value);
  }
  try {
    const value: unknown = JSON.parse(response.text);
    if (typeof value === 'string' && value.trim() !== '') return oneLine(value);
  } catch {
    // not JSON: fall through to the status line
  }
  // Not users-server's answer (it always sends a problem document): something else answered at --url.
  const next =
    response.status >= 500
      ? 'try again later, or check what stands between usersctl and users-server (a proxy)'
      : 'check that --url is the address of users-server';
  return `${`the server answered ${response.status} ${oneLine(response.statusText)}`.trimEnd()}; ${next}`;
}

/**
 * The most bytes of one answer usersctl reads (a page of users), or of one
 * line of the feed of changes: a string in node holds at most 512 MiB, and
 * something that is not users-server can send without end.
 */
export const MAX_ANSWER_BYTES = 256 * 1024 * 1024;

/** An answer's body as text, refused past MAX_ANSWER_BYTES before its bytes fill the memory. */
/** The code of an answer whose body did not all come within --timeout of its head. */
const ANSWER_TIMEOUT = 'ANSWER_TIMEOUT';

/**
 * The body of an answer, read whole within `ms` of its head: bodyTimeout
 * bounds each wait between chunks, so a server that trickles a byte at a
 * time could otherwise hold a command for ever.
 */
async function answerText(res: Dispatcher.ResponseData<unknown>, origin: string, ms: number): Promise<string> {
  const deadline = setTimeout(
    () => res.body.destroy(Object.assign(new Error('the answer did not all come in time'), { code: ANSWER_TIMEOUT })),
    ms,
  );
  try {
    return await bodyText(res, origin);
  } finally {
    clearTimeout(deadline);
  }
}

async function bodyText(res: Dispatcher.ResponseData<unknown>, origin: string): Promise<string> {
  const tooLarge = () => {
    res.body.destroy();
    return new CliError(
      `the answer of ${origin} is larger than ${MAX_ANSWER_BYTES / 1024 / 1024} MiB, more than usersctl reads; check that --url is the address of users-server, or list fewer users a page (--limit)`,
      EXIT.unexpected,
    );
  };
  if (Number(single(res.headers['content-length']) ?? 0) > MAX_ANSWER_BYTES) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += (chunk as Buffer).length;
    if (size > MAX_ANSWER_BYTES) throw tooLarge();
    chunks.push(chunk as Buffer);
  }
  return (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)).toString('utf8');
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

export function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function isRedirect(status: number): boolean {
  return status === 301 || status === 302 || status === 307 || status === 308;
}

/** Retry-After (RFC 9110 section 10.2.3): delay-seconds or an HTTP-date; milliseconds from now. */
export function retryAfterMs(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const text = single(value)?.trim();
  if (text === undefined || text === '') return undefined;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // An HTTP-date names its day and month in letters; Date.parse alone takes "-5" as a year.
  if (!/^[A-Za-z]{3},? /.test(text)) return undefined;
  const date = Date.parse(text);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

/** The error code of a network failure; AggregateError (happy eyeballs) carries it on its members. */
/** True when `error`, or an error it was caused by, has this name. */
function hasName(error: unknown, name: string): boolean {
  for (let e = error; typeof e === 'object' && e !== null; e = (e as { cause?: unknown }).cause)
    if ((e as { name?: unknown }).name === name) return true;
  return false;
}

function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const e = error as { code?: unknown; errors?: unknown; cause?: unknown; name?: unknown };
  if (typeof e.code === 'string') return e.code;
  if (Array.isArray(e.errors))
    for (const inner of e.errors) {
      const code = errorCode(inner);
      if (code !== undefined) return code;
    }
  if (e.cause !== undefined) return errorCode(e.cause);
  if (e.name === 'TimeoutError') return 'ETIMEDOUT';
  return undefined;
}

function maskRequestHeader(name: string, value: string): string {
  const lower = name.toLowerCase();
  if (lower === 'authorization') return /\s/.test(value) ? value.replace(/\s.*$/s, ' ***') : '***';
  if (lower === 'cookie')
    return value
      .split(/;\s*/)
      .map((pair) => pair.replace(/=.*$/, '=***'))
      .join('; ');
  return value;
}

/** `USER_TOKEN=abc; Path=/` → `USER_TOKEN=***; Path=/`: the attributes stay visible. */
export function maskSetCookie(value: string): string {
  return value.replace(/^([^=;]*)=[^;]*/, '$1=***');
}
