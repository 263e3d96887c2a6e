import { MERGE_PATCH_TYPE } from '../../shared/merge-patch.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HEALTH_PATH, LOGIN_PATH, LOGOUT_PATH } from '../../shared/endpoints.js';
import { problems } from '../../shared/problems.js';
import { HttpError, StoreFailedError, StoreFullError, StoreUnavailableError } from '../errors.js';
import type { Config } from '../ops/config.js';
import { Metrics } from '../ops/metrics.js';
import type { Accounts } from '../security/credentials.js';
import type { LoginLimits } from '../security/login-limit.js';
import { limitKey, RateLimiter } from '../security/rate-limit.js';
import type { Store } from '../store/store.js';
import type { UserSchema } from '../users/user-schema.js';
import { clientAddress } from './client-address.js';
import { ObservedResponse } from './observe.js';
import { HostNames, nameOf, type HostVerdict } from './host-names.js';
import { isCrossSite } from './origin.js';
import { buildOpenApi } from './openapi.js';
import { sendEmpty, sendProblem } from './response.js';
import type { Context, Route, RouteDeps } from './route.js';
import { Router } from './router.js';
import { sessionRoutes } from './routes/login.js';
import { ChangeFeeds, changesRoute } from './routes/changes.js';
import { healthRoute, metricsRoute, openApiRoute, readinessRoute, READY_PATH } from './routes/operations.js';
import { indexesRoute } from './routes/indexes.js';
import { userRoutes } from './routes/users.js';
import { tokenRoutes } from './routes/tokens.js';
import { consoleRoutes } from './routes/console.js';
import { SessionCookies } from './session-cookies.js';
import { AccessControl } from './access-control.js';

/** How long a write refused on a full disk is told to wait: the disk is checked again once a second. */
const DISK_FULL_RETRY_SECONDS = 5;

interface AppDeps {
  store: Store;
  config: Config;
  accounts: Accounts;
  /** Looked at before each login, so an account just added can log in at once. */
  accountsFile?: { refresh(): void | Promise<void> };
  /** The failed-login limit; one instance's own when absent. */
  loginLimits?: LoginLimits;
  /** Session signing keys: the first signs, all verify. */
  keys: readonly Buffer[];
  /**
   * Milliseconds since the epoch; tests inject their own clock. When given,
   * it also drives the rate limiter's refill (otherwise a monotonic clock).
   */
  clock?: () => number;
  /** Where errors that are bugs are reported, with their stacks. */
  logError?: (message: string) => void;
  /** Where operational lines go (every login): stderr when absent. */
  log?: (line: string) => void;
}

export interface App {
  /** The `(req, res)` listener of the server (server.ts), whose responses are ObservedResponses. */
  handle: (req: IncomingMessage, res: ObservedResponse) => void;
  readonly routes: readonly Route[];
  /** Request counters by route; the server's observer feeds them, GET /metrics shows them. */
  readonly metrics: Metrics;
  /** The OpenAPI document served at /openapi.json now: built again when the schema of the users' fields changes. */
  readonly openapi: Record<string, unknown>;
  /** The feeds of changes under way (GET /changes): counted, and ended when the server stops. */
  readonly feeds: ChangeFeeds;
}

/** Builds the request listener: routing, error handling and every endpoint. */
export function createApp(deps: AppDeps): App {
  return new UsersApp(deps);
}

class UsersApp implements App {
  readonly routes: readonly Route[];
  readonly metrics: Metrics;
  readonly feeds: ChangeFeeds;
  /** The document, and the schema of the users' fields it was built with. */
  private document: { readonly schema: UserSchema | undefined; readonly json: Record<string, unknown> } | undefined;
  private readonly router: Router;
  private readonly sessions: SessionCookies;
  /** Milliseconds since the epoch: a request's Context reads it when first asked. */
  readonly clock: () => number;
  private readonly logError: (message: string) => void;
  /** The rate-limit check; undefined with --rate-limit 0. */
  private readonly admit: Gate | undefined;
  /** The names a request may give for this server (DNS rebinding). */
  private readonly hostNames: HostNames;

  constructor(private readonly deps: AppDeps) {
    this.clock = deps.clock ?? Date.now;
    this.logError = deps.logError ?? ((message: string) => process.stderr.write(message + '\n'));
    this.sessions = new SessionCookies(deps);
    this.hostNames = new HostNames(deps.config);
    const access = new AccessControl({ ...deps, sessions: this.sessions });
    this.feeds = new ChangeFeeds(deps.store);
    const routeDeps: RouteDeps = {
      ...deps,
      sessions: this.sessions,
      access,
      log: deps.log ?? ((line: string) => process.stderr.write(line + '\n')),
    };
    this.routes = [
      ...sessionRoutes(routeDeps),
      ...userRoutes(routeDeps),
      indexesRoute(routeDeps),
      ...tokenRoutes(routeDeps),
      changesRoute(routeDeps, this.feeds),
      healthRoute(),
      readinessRoute(routeDeps),
      metricsRoute(routeDeps, () => this.metrics, this.feeds),
      openApiRoute(() => this.openapi),
      ...consoleRoutes(routeDeps),
    ];
    this.router = new Router(this.routes);
    this.metrics = new Metrics(this.router.paths);
    this.admit =
      deps.config.rateLimit > 0 ? rateLimitGate(deps, (res, error) => this.answerFailure(res, error)) : undefined;
  }

  get openapi(): Record<string, unknown> {
    const schema = this.deps.store.userSchema();
    if (this.document === undefined || this.document.schema !== schema)
      this.document = { schema, json: buildOpenApi(this.routes, schema?.setting) };
    return this.document.json;
  }

  readonly handle = (req: IncomingMessage, res: ObservedResponse): void => {
    const fieldsError = checkFields(req, this.hostNames);
    if (fieldsError !== undefined) return this.fail(res, fieldsError);
    const url = req.url!;
    const match = this.router.match(req.method ?? '', url);
    if (match.kind !== 'bad-target' && url.charCodeAt(0) !== 0x2f) {
      const authorityError = authorityProblem(url, this.hostNames);
      if (authorityError !== undefined) return this.fail(res, authorityError);
    }
    // With --rate-limit 0 this one comparison is all rate limiting costs.
    if (this.admit !== undefined && !this.admit(req, res, this.router.paths[match.slot])) return;
    res.routeSlot = match.slot;
    switch (match.kind) {
      case 'route':
        return this.dispatch(req, res, match.route, match.params, match.query);
      case 'options':
        return sendEmpty(res, 204, optionsFields(match.allow));
      case 'method-not-allowed':
        return this.fail(
          res,
          new HttpError(problems.methodNotAllowed, `${req.method} is not allowed here; allowed: ${match.allow}.`, {
            Allow: match.allow,
          }),
        );
      case 'not-found':
        return this.fail(res, new HttpError(problems.notFound, 'There is nothing at this path.'));
      case 'bad-target':
        // RFC 9110 section 9.3.7: OPTIONS * asks about the server as a whole.
        if (url === '*' && req.method === 'OPTIONS') return sendEmpty(res, 204, { Allow: this.router.allowAnywhere });
        return this.fail(
          res,
          new HttpError(
            problems.badRequest,
            'The request target must be a path or an absolute http URI (or * for OPTIONS).',
          ),
        );
    }
  };

  /** Runs a matched route, unless the request is a forgery of another site. */
  private dispatch(
    req: IncomingMessage,
    res: ObservedResponse,
    route: Route,
    params: Record<string, string>,
    query: string,
  ): void {
    if (this.forgedBySite(req, route)) {
      return this.fail(
        res,
        new HttpError(
          problems.forbidden,
          "A page of another site may not change anything with this server's session cookie; send the request from this server's own pages, or without the cookie.",
        ),
      );
    }
    const ctx = new RequestContext(req, res, params, query, this);
    // Whatever a handler throws, now or later, is answered by `fail`.
    try {
      const done = route.handler(ctx);
      if (done !== undefined) done.catch((error: unknown) => this.fail(res, error));
    } catch (error) {
      this.fail(res, error);
    }
  }

  /**
   * Cross-site request forgery: a request that could change state (any
   * method but GET, HEAD and OPTIONS, with or without a body), carries the
   * session cookie, and comes from a page of another site. POST /login is
   * not authenticated by the cookie (the sign-in page checks its own form),
   * and with --login-page POST /logout answers a cross-site form with the page.
   */
  private forgedBySite(req: IncomingMessage, route: Route): boolean {
    if (
      route.method === 'GET' ||
      route.path === LOGIN_PATH ||
      (route.path === LOGOUT_PATH && this.deps.config.loginPage)
    )
      return false;
    if (!this.sessions.carried(req)) return false;
    return isCrossSite(req, this.deps.config);
  }

  fail(res: ServerResponse, error: unknown): void {
    // A refusal can reflect writes not yet durable (an id taken, a user
    // gone): answer it once they are, like any read.
    const pending = this.deps.store.settled();
    if (pending === undefined) this.answerFailure(res, error);
    else
      pending.then(
        () => this.answerFailure(res, error),
        (failure: unknown) => this.answerFailure(res, failure),
      );
  }

  /** The one place an error becomes a response: a problem from the catalog, or a bare 500 that leaks nothing. */
  private answerFailure(res: ServerResponse, error: unknown): void {
    if (error instanceof StoreFailedError) {
      // Reported once by the store; the request just fails.
      error = new HttpError(problems.internal, 'The write could not be made durable; the server is stopping.');
    } else if (error instanceof StoreUnavailableError) {
      error = new HttpError(problems.storeUnavailable, error.message, { 'Retry-After': '1' });
    } else if (error instanceof StoreFullError) {
      error = new HttpError(problems.diskFull, error.message, { 'Retry-After': String(DISK_FULL_RETRY_SECONDS) });
    } else if (!(error instanceof HttpError)) {
      const id = res instanceof ObservedResponse ? res.requestId : '';
      this.logError(
        `users-server: unexpected error${id === '' ? '' : ` (request ${id})`}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
      );
      error = new HttpError(problems.internal, 'The server could not complete the request.');
    }
    if (res.headersSent) {
      // Part of a response is on the wire: the only honest signal left is to cut the connection.
      res.destroy();
      return;
    }
    if (hasLargeUnreadBody(res.req)) res.setHeader('Connection', 'close');
    sendProblem(res, error as HttpError);
  }
}

/** A request's Context: a class, so that `fail` costs no closure per request. */
class RequestContext implements Context {
  /** `now` once read; -1 before. */
  private readAt = -1;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly params: Record<string, string>,
    readonly query: string,
    private readonly app: { fail(res: ServerResponse, error: unknown): void; readonly clock: () => number },
  ) {}

  /** Read from the clock when first asked, then the same for the whole request: most GETs never ask. */
  get now(): number {
    if (this.readAt < 0) this.readAt = this.app.clock();
    return this.readAt;
  }

  fail(error: unknown): void {
    this.app.fail(this.res, error);
  }
}

type Gate = (req: IncomingMessage, res: ServerResponse, pattern: string | undefined) => boolean;

/**
 * The rate-limit check run before a matched route is answered, given the
 * path pattern matched (undefined for none): true lets the request through
 * (with its RateLimit-Policy and RateLimit fields set), false means a 429
 * was answered. Every path is limited, a bad target included, except
 * /healthz and /readyz: a load balancer's probe refused with 429 would take
 * a healthy server out of rotation.
 */
function rateLimitGate(deps: AppDeps, refuse: (res: ServerResponse, error: unknown) => void): Gate {
  const { config } = deps;
  const limiter = new RateLimiter({
    rate: config.rateLimit,
    burst: config.rateBurst || config.rateLimit,
    ...(deps.clock && { now: deps.clock }),
  });
  return (req, res, pattern) => {
    if (pattern === HEALTH_PATH || pattern === READY_PATH) return true;
    const decision = limiter.take(limitKey(clientAddress(req, config)));
    const field = limiter.field(decision);
    if (decision.admitted) {
      res.setHeader('RateLimit-Policy', limiter.policy);
      res.setHeader('RateLimit', field);
      return true;
    }
    // Retry-After and the effective window agree, as the draft asks (section 6).
    const headers = { 'Retry-After': String(decision.seconds), 'RateLimit-Policy': limiter.policy, RateLimit: field };
    refuse(
      res,
      new HttpError(
        problems.tooManyRequests,
        `This client address is over its rate limit (${limiter.rate}/s, burst ${limiter.burst}); retry after ${decision.seconds} s.`,
        headers,
      ),
    );
    return false;
  };
}

/**
 * The field lines a request is refused for before routing, read in one
 * pass over them: more than MAX_FIELD_LINES (431), Host (RFC 9112 section
 * 3.2: a server MUST answer 400 to an HTTP/1.1 request without Host and to
 * any request with more than one Host line; node's own check is off, it
 * answers a bare 400 that is not a problem document; a name not this
 * server's is 421) and a transfer coding this server does not decode.
 */
function checkFields(req: IncomingMessage, names: HostNames): HttpError | undefined {
  const raw = req.rawHeaders;
  // node stops collecting lines past its maxHeadersCount, MAX_FIELD_LINES + 1
  // (server.ts): a second Host among the lines it drops would go unseen.
  if (raw.length > 2 * MAX_FIELD_LINES)
    return new HttpError(
      problems.requestHeaderFieldsTooLarge,
      `The request has more than ${MAX_FIELD_LINES} header lines.`,
      { Connection: 'close' },
    );
  let hosts = 0;
  let host = '';
  let coded = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (isHostName(name)) {
      // node's req.headers.host is the first line's value.
      if (hosts++ === 0) host = raw[i + 1]!;
    } else if (name.length === TRANSFER_ENCODING.length && name.toLowerCase() === TRANSFER_ENCODING) coded = true;
  }
  const hostError = hostProblem(hosts, host, req.httpVersion, names);
  if (hostError !== undefined) return hostError;
  const coding = coded ? unknownCoding(req) : undefined;
  if (coding !== undefined)
    return new HttpError(
      problems.notImplemented,
      `This server decodes no transfer coding but chunked; the request used ${JSON.stringify(coding)}.`,
      { Connection: 'close' },
    );
  return undefined;
}

/** The most header lines a request may have: Apache httpd's LimitRequestFields; a browser sends about 20. */
export const MAX_FIELD_LINES = 100;

const TRANSFER_ENCODING = 'transfer-encoding';

/** What is wrong with a request's `hosts` Host lines, the first of them `host`; undefined for nothing. */
function hostProblem(hosts: number, host: string, httpVersion: string, names: HostNames): HttpError | undefined {
  if (hosts > 1) return badHost('The request has more than one Host field.');
  if (hosts === 0) return httpVersion === '1.0' ? undefined : badHost('An HTTP/1.1 request needs a Host field.');
  return hostVerdictError(names.judge(host), host, 'Host field');
}

/** The refusal of a Host value (or a target's authority) judged anything but allowed. */
function hostVerdictError(verdict: HostVerdict, host: string, where: string): HttpError | undefined {
  if (verdict === 'allowed') return undefined;
  if (verdict === 'malformed') return badHost(`The ${where} is not a host name or address with an optional port.`);
  const name = nameOf(host) ?? host;
  return new HttpError(
    problems.misdirectedRequest,
    `The ${where} names ${JSON.stringify(name)}, which is not a name of this server; if clients reach it by that name, start it with --allowed-hosts ${name} (USERS_ALLOWED_HOSTS).`,
  );
}

function badHost(detail: string): HttpError {
  return new HttpError(problems.badRequest, detail, { Connection: 'close' });
}

/** True for "host" in any case. */
function isHostName(name: string): boolean {
  return name.length === HOST_FIELD.length && name.toLowerCase() === HOST_FIELD;
}

const HOST_FIELD = 'host';

/**
 * RFC 9112 section 3.2.2: an absolute-form target names the server in its
 * authority (userinfo aside), which is judged like Host; undefined for an
 * origin-form target or an allowed authority.
 */
function authorityProblem(url: string, names: HostNames): HttpError | undefined {
  const authority = ABSOLUTE_AUTHORITY.exec(url)?.[1];
  if (authority === undefined) return undefined;
  const host = authority.slice(authority.lastIndexOf('@') + 1);
  return hostVerdictError(names.judge(host), host, "request target's authority");
}

const ABSOLUTE_AUTHORITY = /^https?:\/\/([^/?#]*)/i;

/**
 * RFC 9112 section 6.1: a server that receives a transfer coding it does
 * not understand ought to answer 501. node decodes `chunked` and leaves
 * any other coding's bytes in the body; this server decodes none, so
 * `gzip, chunked` is refused instead of reading compressed bytes as JSON.
 * (A coding after chunked, or no chunked at all, is node's 400.)
 */
function unknownCoding(req: IncomingMessage): string | undefined {
  const field = req.headers['transfer-encoding'];
  if (field === undefined) return undefined;
  const codings = field.split(',').map((coding) => coding.trim().toLowerCase());
  if (codings.at(-1) !== 'chunked') return undefined;
  return codings.find((name) => name !== 'chunked');
}

// After a response, node:http reads and discards an unread request body to
// keep the connection. For a chunked or large body, closing is cheaper.
const DISCARD_LIMIT = 64 * 1024;

function hasLargeUnreadBody(req: IncomingMessage): boolean {
  if (req.complete) return false;
  const length = req.headers['content-length'];
  return length === undefined ? req.headers['transfer-encoding'] !== undefined : Number(length) > DISCARD_LIMIT;
}

/** OPTIONS of a path: its methods, and for one that takes PATCH the patch formats (RFC 5789 section 3.1). */
function optionsFields(allow: string): Record<string, string> {
  return allow.includes('PATCH') ? { Allow: allow, 'Accept-Patch': MERGE_PATCH_TYPE } : { Allow: allow };
}
