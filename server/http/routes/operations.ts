import { HEALTH_PATH, METRICS_PATH } from '../../../shared/endpoints.js';
import { problems } from '../../../shared/problems.js';
import { HttpError } from '../../errors.js';
import { METRICS_CONTENT_TYPE, type Metrics } from '../../ops/metrics.js';
import { entityTag, etagMatches } from '../../users/entity-tag.js';
import { JSON_TYPE } from '../media-type.js';
import { empty, headers, json, NEEDS_SESSION_TO_READ, parameter, schema, SESSION_OPTIONAL } from '../openapi.js';
import { sendEmpty } from '../response.js';
import type { Route, RouteDeps } from '../route.js';

const OPENAPI_PATH = '/openapi.json';

const HEALTH_BODY = JSON.stringify({ status: 'ok' });

/** GET /healthz: alive and serving; never limited, never authenticated. */
export function healthRoute(): Route {
  return {
    method: 'GET',
    path: HEALTH_PATH,
    handler: ({ res }) => {
      res.writeHead(200, {
        'Content-Type': JSON_TYPE,
        'Content-Length': String(HEALTH_BODY.length),
        'Cache-Control': 'no-store',
      });
      res.end(HEALTH_BODY);
    },
    doc: {
      operationId: 'getHealth',
      summary: 'Liveness check',
      tags: ['operations'],
      security: [],
      responses: { '200': json('The server is serving.', schema('Health')) },
      problems: [],
    },
  };
}

export const READY_PATH = '/readyz';

/**
 * GET /readyz: whether this instance can take writes now (its store open
 * and writable, its database answering): 200 `{"status":"ready"}`, else 503
 * with the reason and `Retry-After`. Unauthenticated, cheap, never rate
 * limited: a load balancer's probe. /healthz stays the liveness probe.
 */
export function readinessRoute(deps: RouteDeps): Route {
  return {
    method: 'GET',
    path: READY_PATH,
    handler: async ({ res }) => {
      const readiness = await deps.store.readiness();
      if (!readiness.ready)
        throw new HttpError(problems.notReady, `Not ready: ${readiness.reason}.`, { 'Retry-After': '1' });
      res.writeHead(200, {
        'Content-Type': JSON_TYPE,
        'Content-Length': String(READY_BODY.length),
        'Cache-Control': 'no-store',
      });
      res.end(READY_BODY);
    },
    doc: {
      operationId: 'getReadiness',
      summary: 'Readiness check: the store can take writes',
      description:
        "A load balancer's probe: 200 when this instance's store is open and writable (its database answering), else 503 with the reason. No authentication, never rate limited.",
      tags: ['operations'],
      security: [],
      responses: { '200': json('Ready.', schema('Ready')) },
      problems: [503],
    },
  };
}

const READY_BODY = JSON.stringify({ status: 'ready' });

/**
 * GET /metrics: the Prometheus exposition. It reads like `/users`: open,
 * except under `--require-session all`, where it needs a session too
 * (counts and sizes tell something about the data).
 */
export function metricsRoute(
  deps: RouteDeps,
  metrics: () => Metrics,
  feeds?: { open: number; lines: number; cut: number },
): Route {
  const { store, access } = deps;
  return {
    method: 'GET',
    path: METRICS_PATH,
    handler: async (ctx) => {
      const { res } = ctx;
      await access.authorize(ctx, 'read');
      const stats = await store.stats(ctx.now);
      const body = metrics().render(
        feeds === undefined ? stats : { ...stats, feeds: { open: feeds.open, lines: feeds.lines, cut: feeds.cut } },
      );
      res.writeHead(200, {
        'Content-Type': METRICS_CONTENT_TYPE,
        'Content-Length': String(Buffer.byteLength(body)),
        'Cache-Control': 'no-store',
      });
      res.end(body);
    },
    doc: {
      operationId: 'getMetrics',
      summary: 'Metrics in the Prometheus text format 0.0.4',
      description: `Request counts by route, method and status, a latency histogram, users, live reservations, journal size, fsync latency. ${NEEDS_SESSION_TO_READ}`,
      tags: ['operations'],
      security: SESSION_OPTIONAL,
      responses: {
        '200': {
          description: 'The exposition.',
          headers: headers(),
          content: { [METRICS_CONTENT_TYPE]: { schema: { type: 'string' } } },
        },
      },
      problems: [401],
    },
  };
}

/**
 * GET /openapi.json: the document, serialized once per version of it. It
 * changes only with the server's code and the schema of the users' fields,
 * so it carries a strong ETag and clients revalidate (`no-cache`) instead
 * of refetching.
 */
export function openApiRoute(document: () => Record<string, unknown>): Route {
  let serialized: Record<string, unknown> | undefined;
  let body = '';
  let etag = '';
  return {
    method: 'GET',
    path: OPENAPI_PATH,
    handler: ({ req, res }) => {
      const current = document();
      if (current !== serialized) {
        serialized = current;
        body = JSON.stringify(current);
        etag = entityTag(body);
      }
      const ifNoneMatch = req.headers['if-none-match'];
      if (ifNoneMatch !== undefined && etagMatches(ifNoneMatch, etag, true)) {
        sendEmpty(res, 304, { ETag: etag, 'Cache-Control': 'no-cache' });
        return;
      }
      res.writeHead(200, {
        ETag: etag,
        'Cache-Control': 'no-cache',
        'Content-Type': JSON_TYPE,
        'Content-Length': String(Buffer.byteLength(body)),
      });
      res.end(body);
    },
    doc: {
      operationId: 'getOpenApi',
      summary: 'This document',
      tags: ['operations'],
      security: [],
      parameters: [parameter('If-None-Match')],
      responses: {
        '200': json('The OpenAPI 3.1 description of the API.', { type: 'object' }, 'ETag'),
        '304': empty('`If-None-Match` matches the current `ETag`.', 'ETag'),
      },
      problems: [],
    },
  };
}
