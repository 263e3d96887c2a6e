/**
 * usersctl's HTTP transport: one keep-alive undici Agent per process, the
 * session's cookies (or the API token) on every request, timeouts, retries
 * where they are safe, same-origin redirects, and `-v` tracing with secrets
 * masked.
 */
import type { Agent, Dispatcher } from 'undici';
import { PROBLEM_TYPE_PREFIX, problems } from '../shared/problems.js';
import { isRedirect, oneLine, problemOf, single, statusError, type Response } from './answers.js';
import { AnswerTimeoutError, CliError, EXIT, NetworkError } from './exit-codes.js';
import { networkError } from './network-failures.js';
import { CookieSession } from './session.js';
import { STOP_EXIT, type Interruption } from './streams.js';

type Method = 'GET' | 'HEAD' | 'PUT' | 'PATCH' | 'DELETE' | 'POST';

interface Request {
  method: Method;
  /** Path and query, starting with `/`; appended to the base URL's path. */
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

interface ClientOptions {
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

/** What `HttpClient.stream` does with an answer that streams. */
interface StreamHandlers {
  onHeaders(headers: Response['headers']): void;
  onChunk(text: string): void | Promise<void>;
  /** ms a body may stay silent. */
  idleMs: number;
  signal?: AbortSignal;
}

// Retry policy (docs/cli.md "Retries").
const BACKOFF_BASE_MS = 100;
const BACKOFF_CAP_MS = 5_000;
const RETRY_AFTER_CAP_MS = 30_000;
const MAX_REDIRECTS = 10;
/** Statuses that say "try again" without saying the request was wrong. */
const RETRYABLE_STATUS: ReadonlySet<number> = new Set([408, 429, 502, 503, 504]);
/** Methods whose repetition is harmless (RFC 9110 section 9.2.2). */
const IDEMPOTENT: ReadonlySet<Method> = new Set(['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE']);
/** Failures before a connection exists: the request never left, so even a bare POST may be resent. */
const NOT_SENT_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
]);
const IN_PROGRESS_TYPE = PROBLEM_TYPE_PREFIX + problems.idempotencyInProgress.code;

/**
 * The most bytes of one answer usersctl reads (a page of users), or of one
 * line of the feed of changes: a string in node holds at most 512 MiB, and
 * something that is not users-server can send without end.
 */
export const MAX_ANSWER_BYTES = 256 * 1024 * 1024;

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

export class HttpClient {
  readonly origin: string;
  /** The cookie jar of this run: the session the requests carry when no API token is given. */
  readonly session: CookieSession;
  private readonly prefix: string;
  /** undici's Agent, loaded and made at the first request: a command that sends none never loads undici. */
  private agent: Promise<Agent> | undefined;
  /** True once the server answered anything in HTTP in this run: it is no HTTPS port. */
  private answered = false;
  /** Ends the wait before a retry, once the command is stopped. */
  private wake: (() => void) | undefined;

  constructor(private readonly options: ClientOptions) {
    this.origin = options.baseUrl.origin;
    this.prefix = options.baseUrl.pathname.replace(/\/+$/, '');
    this.session = new CookieSession({
      jarPath: options.jarPath,
      server: options.baseUrl.href.replace(/\/$/, ''),
      warn: options.warn,
    });
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
      const response = await this.attempt(request, path, attempt, retryable);
      if (response === undefined) continue;
      const target = redirects < MAX_REDIRECTS ? this.redirectTarget(request, response, path) : undefined;
      if (target === undefined) return response;
      redirects++;
      path = target;
      this.options.trace?.(`* following ${response.status} to ${path}`);
      // A redirect starts the retries afresh.
      attempt = -1;
    }
  }

  /** One attempt of `send`: its answer, or undefined once the wait before the next attempt is over. */
  private async attempt(
    request: Request,
    path: string,
    attempt: number,
    retryable: boolean,
  ): Promise<Response | undefined> {
    const left = this.options.retries - attempt;
    let response: Response;
    try {
      response = await this.once(request, path);
    } catch (error) {
      if (!(error instanceof NetworkError)) throw error;
      if (left > 0 && (retryable || (error.code !== undefined && NOT_SENT_CODES.has(error.code)))) {
        await this.pause(attempt, undefined, error.message);
        return undefined;
      }
      throw error;
    }
    if (left > 0 && retryable && worthRetrying(request.method, response)) {
      const retryAfter = retryAfterMs(response.headers['retry-after']);
      // Waiting less than the server asked is pointless, and longer than
      // the cap is not what someone at a shell expects: report it now.
      if (retryAfter === undefined || retryAfter <= RETRY_AFTER_CAP_MS) {
        await this.pause(attempt, retryAfter, `${response.status} ${oneLine(response.statusText)}`.trim());
        return undefined;
      }
      this.options.trace?.(`* not retrying: Retry-After asks for more than ${RETRY_AFTER_CAP_MS / 1000} s`);
    }
    return response;
  }

  /** The path and query a redirect that `send` follows points to: same origin, and never for a POST. */
  private redirectTarget(request: Request, response: Response, path: string): string | undefined {
    const location = single(response.headers.location);
    if (!isRedirect(response.status) || location === undefined || request.method === 'POST') return undefined;
    const target = new URL(location, this.origin + path);
    return target.origin === this.origin ? target.pathname + target.search : undefined;
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

  /** Writes the jar back when a response set or cleared a cookie, then closes the connections. */
  async close(): Promise<void> {
    try {
      await this.session.save();
    } finally {
      if (this.agent !== undefined) await (await this.agent).close();
    }
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
      const res = await this.dispatch({
        path,
        method: request.method,
        headers,
        headersTimeout: this.options.timeoutMs,
        bodyTimeout: handlers.idleMs,
        ...(handlers.signal !== undefined && { signal: handlers.signal }),
      });
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
      const cookie = await this.session.cookieHeader(url);
      if (cookie !== '') headers.cookie = cookie;
    }
    return headers;
  }

  /** Sends `request` to `path` once, traced with -v; the cookies it sets go into the session. */
  private async once(request: Request, path: string): Promise<Response> {
    const url = this.origin + path;
    const headers = await this.credentials(url, request.headers);
    const trace = this.options.trace;
    if (trace !== undefined) traceRequest(trace, request, path, new URL(this.origin).host, headers);
    const response = await this.exchange(request, path, headers);
    if (trace !== undefined) traceResponse(trace, response);
    if (this.options.token === undefined) await this.session.storeCookies(url, response.headers['set-cookie']);
    return response;
  }

  /** The whole answer to one request, or the NetworkError of its failure. */
  private async exchange(request: Request, path: string, headers: Record<string, string>): Promise<Response> {
    const timeout = this.options.timeoutMs;
    try {
      const res = await this.dispatch({
        path,
        method: request.method,
        headers,
        body: request.body ?? null,
        headersTimeout: timeout,
        bodyTimeout: timeout,
      });
      const text = await answerText(res, this.origin, timeout);
      return { status: res.statusCode, statusText: res.statusText ?? '', headers: res.headers, text };
    } catch (error) {
      if (error instanceof CliError) throw error;
      throw this.networkError(error);
    }
  }

  /** Sends a request to the origin through the Agent, resolving at the answer's head. */
  private async dispatch(
    options: Omit<Dispatcher.RequestOptions, 'origin'>,
  ): Promise<Dispatcher.ResponseData<unknown>> {
    const agent = await this.connections();
    const res = await agentRequest.call(agent, { origin: this.origin, ...options });
    this.answered = true;
    return res;
  }

  private networkError(error: unknown): NetworkError {
    return networkError(error, { origin: this.origin, timeoutMs: this.options.timeoutMs, answered: this.answered });
  }

  /** Waits before the retry after `attempt`, unless the command is stopped (then throws why). */
  private async pause(attempt: number, retryAfter: number | undefined, why: string): Promise<void> {
    const delay = retryAfter ?? backoffMs(attempt);
    this.throwIfStopped(why);
    this.options.trace?.(`* ${why}; retry ${attempt + 1} of ${this.options.retries} in ${delay} ms`);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => ((this.wake = undefined), resolve()), delay);
      this.wake = () => (clearTimeout(timer), (this.wake = undefined), resolve());
    });
    this.throwIfStopped(why);
  }

  private throwIfStopped(why: string): void {
    const reason = this.options.interruption?.reason;
    if (reason !== undefined)
      throw new CliError(
        `${why}; stopped (${this.options.interruption?.label}) instead of trying again`,
        STOP_EXIT[reason],
      );
  }
}

/**
 * Exponential backoff with jitter: half fixed, half random, so that
 * clients that failed together do not retry together.
 */
function backoffMs(attempt: number): number {
  const ceiling = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt);
  return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
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

/**
 * The body of an answer, read whole within `ms` of its head: bodyTimeout
 * bounds each wait between chunks, so a server that trickles a byte at a
 * time could otherwise hold a command for ever.
 */
async function answerText(res: Dispatcher.ResponseData<unknown>, origin: string, ms: number): Promise<string> {
  const deadline = setTimeout(() => res.body.destroy(new AnswerTimeoutError(new URL(origin).host, ms / 1000)), ms);
  try {
    return await bodyText(res, origin);
  } finally {
    clearTimeout(deadline);
  }
}

/** An answer's body as text, refused past MAX_ANSWER_BYTES before its bytes fill the memory. */
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

/** The `-v` lines of a request, its credentials masked. */
function traceRequest(
  trace: (line: string) => void,
  request: Request,
  path: string,
  host: string,
  headers: Record<string, string>,
): void {
  trace(`> ${request.method} ${path} HTTP/1.1`);
  trace(`> host: ${host}`);
  for (const [name, value] of Object.entries(headers)) trace(`> ${name}: ${maskRequestHeader(name, value)}`);
  if (request.body !== undefined) trace(`> content-length: ${Buffer.byteLength(request.body)}`);
  trace('>');
}

/** The `-v` lines of an answer's head, its cookies' values masked and each line made safe for a terminal. */
function traceResponse(trace: (line: string) => void, response: Response): void {
  trace(`< HTTP/1.1 ${response.status} ${oneLine(response.statusText)}`.trimEnd());
  for (const [name, value] of Object.entries(response.headers)) {
    for (const v of Array.isArray(value) ? value : [value ?? ''])
      trace(`< ${name}: ${oneLine(name === 'set-cookie' ? maskSetCookie(v) : v)}`);
  }
  trace('<');
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
