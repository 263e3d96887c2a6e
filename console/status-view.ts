/**
 * The server at a glance, from `/readyz` and `/metrics`: whether the store
 * takes writes, how many users, how long the process has run, and requests
 * per second (the difference of the request counter between two reads).
 * Read again every few seconds while the view is shown.
 */
import { ApiError, apiUrl, call } from './api.js';
import { h, replace } from './dom.js';
import { durationText, parseMetrics, requestTotal } from './metrics.js';
import { focusHeading, type ViewContext } from './view.js';

/** How often the figures are read again. */
const EVERY_MS = 2000;

export function showStatus(view: ViewContext): void {
  const heading = h('h1', {}, 'Server status');
  const figures = h('dl', { class: 'figures' });
  const error = h('div', { class: 'error', role: 'alert', hidden: true });
  replace(
    view.main,
    heading,
    error,
    figures,
    h('p', { class: 'hint' }, 'Read from /readyz and /metrics every 2 seconds.'),
  );
  focusHeading(heading, 'Server status');
  let previous: { total: number; at: number } | undefined;
  const read = async () => {
    const [store, metrics] = await Promise.all([readiness(), metricsText()]);
    if (!view.active()) return;
    const at = performance.now();
    if (metrics instanceof Error) {
      replace(error, h('p', {}, `The metrics cannot be read: ${metrics.message}`));
      error.hidden = false;
    } else error.hidden = true;
    const series = metrics instanceof Error ? new Map<string, number>() : parseMetrics(metrics);
    const total = requestTotal(series);
    const rate =
      previous === undefined || total === undefined
        ? 'measuring…'
        : ((total - previous.total) / ((at - previous.at) / 1000)).toFixed(1);
    if (total !== undefined) previous = { total, at };
    const started = series.get('process_start_time_seconds');
    const users = series.get('users_server_users');
    const rows: [string, string][] = [
      ['Store', store],
      ['Users', users === undefined ? '–' : users.toLocaleString('en')],
      ['Uptime', started === undefined ? '–' : durationText(Date.now() / 1000 - started)],
      ['Requests per second', rate],
      ['Change feeds open', String(series.get('users_server_change_feeds') ?? '–')],
      ['Live reservations', String(series.get('users_server_reservations') ?? '–')],
    ];
    const memory = series.get('process_resident_memory_bytes');
    if (memory !== undefined) rows.push(['Memory', `${Math.round(memory / 1048576)} MiB`]);
    replace(figures, ...rows.map(([term, value]) => h('div', {}, h('dt', {}, term), h('dd', {}, value))));
  };
  void read();
  const timer = window.setInterval(() => void read(), EVERY_MS);
  view.onLeave(() => clearInterval(timer));
}

/** What /readyz says: Ready, or Not ready and why. */
async function readiness(): Promise<string> {
  try {
    await call('GET', 'readyz');
    return 'Ready';
  } catch (error) {
    if (error instanceof ApiError) return `Not ready: ${error.message}`;
    return 'Not reachable';
  }
}

async function metricsText(): Promise<string | Error> {
  try {
    const response = await fetch(apiUrl('metrics'), { credentials: 'same-origin', cache: 'no-store' });
    if (!response.ok) return new Error(`the server answered ${response.status}`);
    return await response.text();
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}
