import type { IncomingMessage, ServerResponse } from 'node:http';
import { HEALTH_PATH } from '../../shared/endpoints.js';
import { problems } from '../../shared/problems.js';
import { HttpError, StoreFailedError } from '../errors.js';
import type { Config } from '../ops/config.js';
import { Metrics } from '../ops/metrics.js';
import type { Accounts } from '../security/accounts.js';
import { limitKey, RateLimiter } from '../security/rate-limit.js';
import type { Store } from '../store/store.js';
import { clientAddress } from './client-address.js';
import { ObservedResponse } from './observe.js';
import { buildOpenApi } from './openapi.js';
import { sendEmpty, sendProblem } from './response.js';
import type { Context, Route, RouteDeps } from './route.js';
import { Router, splitTarget } from './router.js';
import { sessionRoutes } from './routes/login.js';
import { healthRoute, metricsRoute, openApiRoute } from './routes/operations.js';
import { userRoutes } from './routes/users.js';
import { SessionCookies } from './session-cookies.js';

export interface AppDeps {
  store: Store;
  config: Config;
  accounts: Accounts;
  /** Looked at before each login, so an account just added can log in at once. */
  accountsFile?: { refresh(): void };
  /** Session signing keys: the first signs, all verify. */
  keys: readonly Buffer[];
  /**
   * Milliseconds since the epoch; tests inject their own clock. When given,
   * it also drives the rate limiter's refill (otherwise a monotonic clock).
   */
  clock?: () => number;
  /** Where errors that are bugs are reported, with their stacks. */
  logError?: (message: string) => void;
}

export interface App {
  /** The `(req, res)` listener for node:http. */
  handle: (req: IncomingMessage, res: ServerResponse) => void;
  readonly routes: readonly Route[];
  /** Request counters by route; the server's observer feeds them, GET /metrics shows them. */
  readonly metrics: Metrics;
  /** The OpenAPI document served at /openapi.json. */
  readonly openapi: Record<string, unknown>;
}

/** Builds the request listener: routing, error handling and every endpoint. */
export function createApp(deps: AppDeps): App {
  const clock = deps.clock ?? Date.now;
  const logError = deps.logError ?? ((message: string) => process.stderr.write(message + '\n'));
  const routeDeps: RouteDeps = { ...deps, sessions: new SessionCookies(deps) };
  const routes: Route[] = [
    ...sessionRoutes(routeDeps),
    ...userRoutes(routeDeps),
    healthRoute(),
    metricsRoute(routeDeps, () => metrics),
    openApiRoute(() => openapi),
  ];
  const router = new Router(routes);
  const admit = deps.config.rateLimit > 0 ? rateLimitGate(deps, answerFailure) : undefined;
  const metrics = new Metrics(router.paths);
  const openapi = buildOpenApi(routes);

  function fail(res: ServerResponse, error: unknown): void {
    // A refusal can reflect writes not yet durable (an id taken, a user
    // gone): answer it once they are, like any read.
    const pending = deps.store.settled();
    if (pending === undefined) answerFailure(res, error);
    else pending.then(() => answerFailure(res, error), (failure: unknown) => answerFailure(res, failure));
  }

  function answerFailure(res: ServerResponse, error: unknown): void {
    if (error instanceof StoreFailedError) {
      // Reported once by the store; the request just fails.
      error = new HttpError(problems.internal, 'The write could not be made durable; the server is stopping.');
    } else if (!(error instanceof HttpError)) {
      const id = res instanceof ObservedResponse ? res.requestId : '';
      logError(`users-server: unexpected error${id === '' ? '' : ` (request ${id})`}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      error = new HttpError(problems.internal, 'The server could not complete the request.');
    }
    if (res.headersSent) {
      // Part of a response is on the wire: the only honest signal left is to cut the connection.
      res.destroy();
      return;
    }
    const httpError = error as HttpError;
    if (hasLargeUnreadBody(res.req)) res.setHeader('Connection', 'close');
    sendProblem(res, httpError);
  }

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const hostError = checkHost(req);
    if (hostError !== undefined) {
      fail(res, new HttpError(problems.badRequest, hostError, { Connection: 'close' }));
      return;
    }
    const target = splitTarget(req.url ?? '');
    // With --rate-limit 0 this one comparison is all rate limiting costs.
    if (admit !== undefined && !admit(req, res, target?.path)) return;
    if (target === undefined) {
      fail(res, new HttpError(problems.badRequest, 'The request target must be a path or an absolute http URI.'));
      return;
    }
    const match = router.match(req.method ?? '', target.path);
    if (res instanceof ObservedResponse) res.routeSlot = match.slot;
    switch (match.kind) {
      case 'route': {
        const ctx: Context = { req, res, params: match.params, query: target.query, now: clock() };
        try {
          const done = match.route.handler(ctx);
          if (done !== undefined) done.catch((error: unknown) => fail(res, error));
        } catch (error) {
          fail(res, error);
        }
        return;
      }
      case 'options':
        sendEmpty(res, 204, { Allow: match.allow });
        return;
      case 'method-not-allowed':
        fail(res, new HttpError(problems.methodNotAllowed, `${req.method} is not allowed here; allowed: ${match.allow}.`, { Allow: match.allow }));
        return;
      case 'not-found':
        fail(res, new HttpError(problems.notFound, 'There is nothing at this path.'));
    }
  }

  return { handle, routes, metrics, openapi };
}

type Gate = (req: IncomingMessage, res: ServerResponse, path: string | undefined) => boolean;

/**
 * The rate-limit check run before routing: true lets the request through
 * (with its RateLimit-Policy and RateLimit fields set), false means a 429
 * was answered. Every path is limited, a bad target included, except
 * /healthz: a load balancer's probe refused with 429 would take a healthy
 * server out of rotation.
 */
function rateLimitGate(deps: AppDeps, refuse: (res: ServerResponse, error: unknown) => void): Gate {
  const { config } = deps;
  const limiter = new RateLimiter({ rate: config.rateLimit, burst: config.rateBurst || config.rateLimit, ...(deps.clock && { now: deps.clock }) });
  return (req, res, path) => {
    if (path === HEALTH_PATH) return true;
    const decision = limiter.take(limitKey(clientAddress(req, config)));
    const field = limiter.field(decision);
    if (decision.admitted) {
      res.setHeader('RateLimit-Policy', limiter.policy);
      res.setHeader('RateLimit', field);
      return true;
    }
    // Retry-After and the effective window agree, as the draft asks (section 6).
    const headers = { 'Retry-After': String(decision.seconds), 'RateLimit-Policy': limiter.policy, RateLimit: field };
    refuse(res, new HttpError(problems.tooManyRequests, `This client address is over its rate limit (${limiter.rate}/s, burst ${limiter.burst}); retry after ${decision.seconds} s.`, headers));
    return false;
  };
}

/**
 * RFC 9112 section 3.2: a server MUST answer 400 to an HTTP/1.1 request
 * without Host and to any request with more than one Host line. (node's own
 * check is off: it answers a bare 400 that is not a problem document.)
 */
function checkHost(req: IncomingMessage): string | undefined {
  let hosts = 0;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 4 && raw[i]!.toLowerCase() === 'host') hosts++;
  if (hosts > 1) return 'The request has more than one Host field.';
  if (hosts === 0 && req.httpVersion !== '1.0') return 'An HTTP/1.1 request needs a Host field.';
  return undefined;
}

// After a response, node:http reads and discards an unread request body to
// keep the connection. For a chunked or large body, closing is cheaper.
const DISCARD_LIMIT = 64 * 1024;

function hasLargeUnreadBody(req: IncomingMessage): boolean {
  if (req.complete) return false;
  const length = req.headers['content-length'];
  return length === undefined ? req.headers['transfer-encoding'] !== undefined : Number(length) > DISCARD_LIMIT;
}
