/**
 * Request metrics kept as plain numbers in arrays sized at start: counting a
 * request is a few lookups and increments, with no allocation, so it can run
 * on every request. `render` writes them, with the gauges it is given, in the
 * Prometheus text exposition format 0.0.4. Every metric: docs/operations.md,
 * "Metrics".
 */
import { Histogram, REQUEST_BUCKETS } from './histogram.js';

/** The Content-Type of the Prometheus text format 0.0.4. */
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** The route label of requests no route matched (404, a bad request target, a malformed message). */
const UNMATCHED = 'unmatched';

/** Method label values; any other method is counted as "other". */
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'other'] as const;
const OTHER_METHOD = METHODS.length - 1;

function methodSlot(method: string | undefined): number {
  switch (method) {
    case 'GET':
      return 0;
    case 'HEAD':
      return 1;
    case 'POST':
      return 2;
    case 'PUT':
      return 3;
    case 'DELETE':
      return 4;
    case 'OPTIONS':
      return 5;
    case 'PATCH':
      return 6;
    default:
      return OTHER_METHOD;
  }
}

/** The statuses users-server answers, given a column up front so counting them never allocates. */
const KNOWN_STATUSES = [
  200, 201, 204, 301, 304, 400, 401, 403, 404, 405, 408, 409, 410, 412, 413, 415, 422, 428, 429, 431, 499, 500, 503,
];

/** Figures read at scrape time, from the store and the process. */
interface Gauges {
  users: number;
  reservations: number;
  journalBytes: number;
  fsyncSeconds: Histogram;
  diskFull?: boolean;
  /** The feeds of changes (GET /changes): following now, lines sent and feeds cut since the start. */
  feeds?: { open: number; lines: number; cut: number };
}

export class Metrics {
  /** Route labels by slot: the table's paths, then "unmatched". */
  private readonly routes: readonly string[];
  /** Status code -> column in `counts`; -1 for a status not seen yet. */
  private readonly statusColumn = new Int16Array(1000).fill(-1);
  private readonly statuses: number[] = [];
  /** One column per status: requests by route slot x method slot. */
  private readonly counts: Float64Array[] = [];
  /** Request durations by route slot. */
  private readonly durations: Histogram[];

  constructor(paths: readonly string[]) {
    this.routes = [...paths, UNMATCHED];
    this.durations = this.routes.map(() => new Histogram(REQUEST_BUCKETS));
    for (const status of KNOWN_STATUSES) this.addColumn(status);
  }

  /**
   * Counts one answered request. `slot` is the index of its path in the
   * route table (-1: unmatched); `seconds` its duration, or undefined when
   * there is none to measure (an error answered by the HTTP parser).
   */
  count(slot: number, method: string | undefined, status: number, seconds: number | undefined): void {
    const route = slot < 0 ? this.routes.length - 1 : slot;
    // node:http only sends statuses from 100 to 999.
    let column = this.statusColumn[status]!;
    if (column < 0) column = this.addColumn(status);
    this.counts[column]![route * METHODS.length + methodSlot(method)]!++;
    if (seconds !== undefined) this.durations[route]!.observe(seconds);
  }

  private addColumn(status: number): number {
    this.statusColumn[status] = this.statuses.length;
    this.statuses.push(status);
    this.counts.push(new Float64Array(this.routes.length * METHODS.length));
    return this.statuses.length - 1;
  }

  /** The whole exposition: request metrics, then `gauges`, then process figures. */
  render(gauges: Gauges): string {
    const out: string[] = [];
    header(out, 'users_server_requests_total', 'counter', 'Requests answered, by route pattern, method and status.');
    for (let column = 0; column < this.counts.length; column++) {
      const counts = this.counts[column]!;
      for (let i = 0; i < counts.length; i++) {
        if (counts[i] === 0) continue;
        const route = this.routes[Math.floor(i / METHODS.length)]!;
        const method = METHODS[i % METHODS.length]!;
        out.push(
          `users_server_requests_total{route="${label(route)}",method="${method}",status="${this.statuses[column]}"} ${counts[i]}`,
        );
      }
    }
    header(
      out,
      'users_server_request_duration_seconds',
      'histogram',
      'Time from the request headers to the end of the response, by route pattern.',
    );
    this.durations.forEach((histogram, slot) => {
      if (histogram.count > 0)
        writeHistogram(out, 'users_server_request_duration_seconds', histogram, `route="${label(this.routes[slot]!)}"`);
    });
    gauge(out, 'users_server_users', 'Users stored.', gauges.users);
    gauge(out, 'users_server_reservations', 'Live (unexpired) reservations.', gauges.reservations);
    gauge(
      out,
      'users_server_journal_bytes',
      'Bytes in the journal files not yet covered by a snapshot (0 with --store memory).',
      gauges.journalBytes,
    );
    gauge(
      out,
      'users_server_disk_full',
      "1 while the journal's disk is full and writes are refused (503 disk-full), else 0.",
      gauges.diskFull === true ? 1 : 0,
    );
    if (gauges.feeds !== undefined) {
      gauge(out, 'users_server_change_feeds', 'Feeds of changes (GET /changes) following now.', gauges.feeds.open);
      header(out, 'users_server_change_lines_total', 'counter', 'Changes sent by the feeds of changes.');
      out.push(`users_server_change_lines_total ${gauges.feeds.lines}`);
      header(
        out,
        'users_server_change_feeds_cut_total',
        'counter',
        'Feeds of changes cut because their reader fell too far behind.',
      );
      out.push(`users_server_change_feeds_cut_total ${gauges.feeds.cut}`);
    }
    header(
      out,
      'users_server_fsync_duration_seconds',
      'histogram',
      'Duration of each journal fdatasync; one covers a batch of writes.',
    );
    writeHistogram(out, 'users_server_fsync_duration_seconds', gauges.fsyncSeconds, '');
    const cpu = process.cpuUsage();
    header(out, 'process_cpu_seconds_total', 'counter', 'User and system CPU time spent, in seconds.');
    out.push(`process_cpu_seconds_total ${(cpu.user + cpu.system) / 1e6}`);
    gauge(out, 'process_resident_memory_bytes', 'Resident memory size in bytes.', process.memoryUsage.rss());
    gauge(
      out,
      'process_start_time_seconds',
      'Start time of the process since the Unix epoch, in seconds.',
      Math.round(performance.timeOrigin) / 1000,
    );
    return out.join('\n') + '\n';
  }
}

function header(out: string[], name: string, type: string, help: string): void {
  out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
}

function gauge(out: string[], name: string, help: string, value: number): void {
  header(out, name, 'gauge', help);
  out.push(`${name} ${value}`);
}

/** The `_bucket` (cumulative, `le`), `_sum` and `_count` series of one histogram. */
function writeHistogram(out: string[], name: string, histogram: Histogram, labels: string): void {
  const prefix = labels === '' ? '' : labels + ',';
  let cumulative = 0;
  for (let i = 0; i < histogram.counts.length; i++) {
    cumulative += histogram.counts[i]!;
    const le = i < histogram.bounds.length ? String(histogram.bounds[i]) : '+Inf';
    out.push(`${name}_bucket{${prefix}le="${le}"} ${cumulative}`);
  }
  const braces = labels === '' ? '' : `{${labels}}`;
  out.push(`${name}_sum${braces} ${histogram.sum}`, `${name}_count${braces} ${histogram.count}`);
}

/** A label value escaped as the text format requires: backslash, double quote and line feed. */
function label(value: string): string {
  return value.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n');
}
