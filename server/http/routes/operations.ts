import type { AppDeps } from '../app.js';
import { METRICS_CONTENT_TYPE, type Metrics } from '../../ops/metrics.js';
import type { Route } from '../router.js';
import type { Sessions } from '../session-cookies.js';

export const METRICS_PATH = '/metrics';

/**
 * GET /metrics: the Prometheus exposition. It reads like `/users`: open,
 * except under `--require-session all`, where it needs a session too
 * (counts and sizes tell something about the data).
 */
export function metricsRoute(deps: AppDeps, sessions: Sessions, metrics: () => Metrics): Route {
  const { store } = deps;
  return {
    method: 'GET',
    path: METRICS_PATH,
    handler: ({ req, res, now }) => {
      sessions.authorize(req, res, now, 'read');
      const stats = store.stats();
      const body = metrics().render({
        users: store.state.users.size,
        reservations: liveReservations(store.state.reservations, now),
        journalBytes: stats.journalBytes,
        fsyncSeconds: stats.fsyncSeconds,
      });
      res.writeHead(200, { 'Content-Type': METRICS_CONTENT_TYPE, 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' });
      res.end(body);
    },
  };
}

/** Reservations not yet expired: the map also holds expired ones until the next sweep. */
function liveReservations(reservations: ReadonlyMap<number, number>, now: number): number {
  let live = 0;
  for (const expiresAt of reservations.values()) if (expiresAt > now) live++;
  return live;
}
