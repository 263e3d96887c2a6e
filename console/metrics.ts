/**
 * Reading the Prometheus text format (0.0.4) of `/metrics` for the status
 * view: the value of each series. Pure: no page, so the tests run it in node.
 */

/**
 * Every sample of the exposition: series (name and labels, as written) -> value. Comments and blank lines are skipped.
 */
export function parseMetrics(text: string): Map<string, number> {
  const series = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    // The value follows the last space; a label value may hold spaces, but never after its closing brace.
    const space = line.lastIndexOf(' ');
    if (space < 0) continue;
    const value = Number(line.slice(space + 1));
    if (!Number.isNaN(value)) series.set(line.slice(0, space), value);
  }
  return series;
}

/**
 * Requests answered so far, all routes, methods and statuses together; undefined when the exposition has no counter.
 */
export function requestTotal(series: ReadonlyMap<string, number>): number | undefined {
  let total: number | undefined;
  for (const [name, value] of series) {
    if (name === 'users_server_requests_total' || name.startsWith('users_server_requests_total{'))
      total = (total ?? 0) + value;
  }
  return total;
}

/** A duration in seconds as a person reads it: `45 s`, `12 min`, `3 h 20 min`, `2 d 4 h`. */
export function durationText(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s} s`;
  const minutes = Math.floor(s / 60);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return `${hours} h ${minutes % 60} min`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}
