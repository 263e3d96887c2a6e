/**
 * GET /metrics (docs/operations.md "Metrics"): the Prometheus text format
 * 0.0.4, parsed strictly here; request counters by route, method and status
 * that move with requests; a latency histogram per route; users, live
 * reservations, journal bytes and fsync latency; access like GET /users.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Histogram } from '../server/ops/histogram.js';
import { Metrics } from '../server/ops/metrics.js';
import { assertProblem, put, rawExchange, send, startTestServer, type TestServer } from './helpers.js';

const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/;
const FLOAT = /^(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]Inf|NaN)$/;

interface Exposition {
  /** Family name -> TYPE. */
  types: Map<string, string>;
  /** `name{a="x",b="y"}` (labels sorted) -> value. */
  samples: Map<string, number>;
}

/** The family a sample belongs to: a histogram's _bucket, _sum and _count series belong to it. */
function familyOf(name: string, types: Map<string, string>): string {
  for (const suffix of ['_bucket', '_sum', '_count']) {
    const base = name.slice(0, -suffix.length);
    if (name.endsWith(suffix) && types.get(base) === 'histogram') return base;
  }
  return name;
}

function parseLabels(text: string): [string, string][] {
  const labels: [string, string][] = [];
  let rest = text;
  while (rest !== '') {
    const m = LABEL.exec(rest);
    assert.ok(m !== null, `malformed labels: {${text}}`);
    labels.push([m[1]!, m[2]!.replace(/\\(["\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c))]);
    rest = rest.slice(m[0].length);
  }
  assert.equal(new Set(labels.map(([k]) => k)).size, labels.length, `a repeated label in {${text}}`);
  return labels;
}

function key(name: string, labels: Record<string, string> = {}): string {
  const sorted = Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1));
  return sorted.length === 0 ? name : `${name}{${sorted.map(([k, v]) => `${k}="${v}"`).join(',')}}`;
}

/**
 * Parses the text format strictly: every line is `# HELP name text`,
 * `# TYPE name type` or `name{labels} value`; HELP and TYPE come once per
 * family, before its samples, whose lines are contiguous; no series twice;
 * histogram buckets are cumulative and end with le="+Inf" equal to _count.
 */
function parseExposition(text: string): Exposition {
  assert.ok(text.endsWith('\n'), 'the exposition ends with a line feed');
  const types = new Map<string, string>();
  const helps = new Set<string>();
  const samples = new Map<string, number>();
  const finished = new Set<string>();
  let current: string | undefined;
  for (const line of text.slice(0, -1).split('\n')) {
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) (.+)$/.exec(line);
      assert.ok(m !== null, `a comment that is not HELP or TYPE: ${JSON.stringify(line)}`);
      const [, kind, name, rest] = m;
      assert.match(name!, METRIC_NAME);
      assert.ok(!finished.has(name!) && current !== name, `${kind} for ${name} after its samples`);
      if (kind === 'HELP') {
        assert.ok(!helps.has(name!), `two HELP lines for ${name}`);
        helps.add(name!);
      } else {
        assert.ok(!types.has(name!), `two TYPE lines for ${name}`);
        assert.match(rest!, /^(counter|gauge|histogram|summary|untyped)$/);
        types.set(name!, rest!);
      }
      continue;
    }
    const m = SAMPLE.exec(line);
    assert.ok(m !== null, `not a sample line: ${JSON.stringify(line)}`);
    const [, name, labelText, value] = m;
    assert.match(value!, FLOAT, `value of ${line}`);
    const family = familyOf(name!, types);
    assert.ok(types.has(family), `a sample of ${family} before its TYPE`);
    assert.ok(helps.has(family), `a sample of ${family} without HELP`);
    if (current !== family) {
      assert.ok(!finished.has(family), `the samples of ${family} are not contiguous`);
      if (current !== undefined) finished.add(current);
      current = family;
    }
    const labels = Object.fromEntries(parseLabels(labelText ?? ''));
    const k = key(name!, labels);
    assert.ok(!samples.has(k), `the series ${k} appears twice`);
    samples.set(k, Number(value));
  }
  checkHistograms(types, samples);
  return { types, samples };
}

function checkHistograms(types: Map<string, string>, samples: Map<string, number>): void {
  for (const [family, type] of types) {
    if (type !== 'histogram') continue;
    // Group buckets by their labels other than le.
    const groups = new Map<string, { le: number; value: number }[]>();
    for (const [k, value] of samples) {
      if (!k.startsWith(`${family}_bucket{`)) continue;
      const labels = Object.fromEntries(parseLabels(k.slice(k.indexOf('{') + 1, -1)));
      assert.ok(labels.le !== undefined, `${k} has no le`);
      const { le, ...rest } = labels;
      const group = key('', rest);
      groups.set(group, [...(groups.get(group) ?? []), { le: le === '+Inf' ? Infinity : Number(le), value }]);
    }
    for (const [group, buckets] of groups) {
      const rest = group === '' ? {} : Object.fromEntries(parseLabels(group.slice(1, -1)));
      for (let i = 1; i < buckets.length; i++) {
        assert.ok(buckets[i]!.le > buckets[i - 1]!.le, `${family}${group}: le values ascend`);
        assert.ok(buckets[i]!.value >= buckets[i - 1]!.value, `${family}${group}: buckets are cumulative`);
      }
      assert.equal(buckets.at(-1)!.le, Infinity, `${family}${group}: the last bucket is +Inf`);
      assert.equal(
        buckets.at(-1)!.value,
        samples.get(key(`${family}_count`, rest)),
        `${family}${group}: +Inf equals _count`,
      );
      assert.ok(samples.has(key(`${family}_sum`, rest)), `${family}${group}: a _sum`);
    }
  }
}

const GOOD =
  '# HELP a_total A.\n# TYPE a_total counter\na_total{x="1"} 2\n# HELP h H.\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 3\nh_count 2\n';
const badExpositions: { name: string; text: string }[] = [
  { name: 'no final line feed', text: GOOD.slice(0, -1) },
  { name: 'a sample before its TYPE', text: 'b 1\n' + GOOD },
  { name: 'a comment other than HELP or TYPE', text: '# hello\n' + GOOD },
  { name: 'a value that is not a number', text: GOOD.replace('} 2\n', '} two\n') },
  { name: 'an unquoted label value', text: GOOD.replace('x="1"', 'x=1') },
  { name: 'the same series twice', text: GOOD.replace('a_total{x="1"} 2\n', 'a_total{x="1"} 2\na_total{x="1"} 3\n') },
  {
    name: 'buckets that are not cumulative',
    text: GOOD.replace('h_bucket{le="+Inf"} 2', 'h_bucket{le="+Inf"} 0').replace('h_count 2', 'h_count 0'),
  },
  { name: '+Inf different from _count', text: GOOD.replace('h_count 2', 'h_count 5') },
  { name: 'a family split in two', text: GOOD + 'a_total{x="2"} 1\n' },
];
test('the strict parser of these tests accepts a well-formed exposition', () => {
  assert.equal(parseExposition(GOOD).samples.size, 5);
});
for (const c of badExpositions) {
  test(`the strict parser of these tests refuses ${c.name}`, () => {
    assert.throws(() => parseExposition(c.text), assert.AssertionError);
  });
}

async function scrape(server: { url: string }, headers: Record<string, string> = {}): Promise<Exposition> {
  const reply = await send(server.url, 'GET', '/metrics', { headers });
  assert.equal(reply.status, 200, reply.text);
  return parseExposition(reply.text);
}

function requests(e: Exposition, route: string, method: string, status: number): number {
  return e.samples.get(key('users_server_requests_total', { route, method, status: String(status) })) ?? 0;
}

function value(e: Exposition, name: string, labels: Record<string, string> = {}): number {
  const v = e.samples.get(key(name, labels));
  assert.ok(v !== undefined, `no series ${key(name, labels)}`);
  return v;
}

async function seeded(t: Parameters<typeof startTestServer>[0], overrides = {}, options = {}): Promise<TestServer> {
  const server = await startTestServer(t, overrides, options);
  assert.equal((await put(server.url, '/users/alice', { name: 'Alice' })).status, 201);
  return server;
}

test('GET /metrics answers 200 in the Prometheus text format 0.0.4 with Cache-Control: no-store, and every line parses strictly', async (t) => {
  const server = await seeded(t);
  const reply = await send(server.url, 'GET', '/metrics');
  assert.equal(reply.status, 200);
  assert.equal(reply.headers['content-type'], CONTENT_TYPE);
  assert.equal(reply.headers['cache-control'], 'no-store');
  assert.equal(Number(reply.headers['content-length']), Buffer.byteLength(reply.text));
  const { types } = parseExposition(reply.text);
  const expected: Record<string, string> = {
    users_server_requests_total: 'counter',
    users_server_request_duration_seconds: 'histogram',
    users_server_users: 'gauge',
    users_server_reservations: 'gauge',
    users_server_journal_bytes: 'gauge',
    users_server_disk_full: 'gauge',
    users_server_change_feeds: 'gauge',
    users_server_change_lines_total: 'counter',
    users_server_change_feeds_cut_total: 'counter',
    users_server_fsync_duration_seconds: 'histogram',
    process_cpu_seconds_total: 'counter',
    process_resident_memory_bytes: 'gauge',
    process_start_time_seconds: 'gauge',
  };
  assert.deepEqual(Object.fromEntries(types), expected);
});

test('HEAD /metrics answers like GET without a body', async (t) => {
  const server = await startTestServer(t);
  const reply = await send(server.url, 'HEAD', '/metrics');
  assert.equal(reply.status, 200);
  assert.equal(reply.headers['content-type'], CONTENT_TYPE);
  assert.equal(reply.text, '');
});

test('users_server_requests_total counts each answered request once, by route pattern, method and status, and the duration histogram counts them per route', async (t) => {
  const server = await seeded(t);
  const before = await scrape(server);
  for (let i = 0; i < 3; i++) assert.equal((await send(server.url, 'GET', '/users/1')).status, 200);
  assert.equal((await send(server.url, 'HEAD', '/users/alice')).status, 200);
  assert.equal((await put(server.url, '/users/alice', { name: 'Alicia' })).status, 200);
  assert.equal((await send(server.url, 'OPTIONS', '/users/1')).status, 204);
  assert.equal((await send(server.url, 'GET', '/users/%2F')).status, 400);
  assert.equal((await send(server.url, 'GET', '/nope')).status, 404);
  assert.equal((await send(server.url, 'GET', '/users/new')).status, 405);
  assert.equal((await send(server.url, 'POST', '/users/1')).status, 405);
  const after = await scrape(server);
  const moved: [string, string, number, number][] = [
    ['/users/:ref', 'GET', 200, 3],
    ['/users/:ref', 'HEAD', 200, 1],
    ['/users/:ref', 'PUT', 200, 1],
    ['/users/:ref', 'OPTIONS', 204, 1],
    ['/users/:ref', 'GET', 400, 1],
    ['/users/:ref', 'POST', 405, 1],
    ['unmatched', 'GET', 404, 1],
    ['/users/new', 'GET', 405, 1],
    ['/metrics', 'GET', 200, 1],
  ];
  for (const [route, method, status, delta] of moved) {
    assert.equal(
      requests(after, route, method, status) - requests(before, route, method, status),
      delta,
      `${method} ${route} ${status}`,
    );
  }
  // Nothing else moved.
  for (const [k, v] of after.samples) {
    if (!k.startsWith('users_server_requests_total{')) continue;
    const counted = moved.some(
      ([route, method, status]) => k === key('users_server_requests_total', { route, method, status: String(status) }),
    );
    if (!counted) assert.equal(v, before.samples.get(k) ?? 0, `${k} moved`);
  }
  const count = (e: typeof before, route: string) =>
    e.samples.get(key('users_server_request_duration_seconds_count', { route })) ?? 0;
  assert.equal(count(after, '/users/:ref') - count(before, '/users/:ref'), 8);
  assert.equal(count(after, 'unmatched') - count(before, 'unmatched'), 1);
  assert.equal(count(after, '/users/new') - count(before, '/users/new'), 1);
});

test('an error answered by the HTTP parser is counted under route "unmatched", method "other"', async (t) => {
  const server = await startTestServer(t);
  const before = await scrape(server);
  assert.match(await rawExchange(server.url, 'NOT HTTP AT ALL\r\n\r\n'), /^HTTP\/1\.1 400 /);
  const after = await scrape(server);
  assert.equal(requests(after, 'unmatched', 'other', 400) - requests(before, 'unmatched', 'other', 400), 1);
});

test('users_server_users is the number of users stored', async (t) => {
  const server = await startTestServer(t);
  assert.equal(value(await scrape(server), 'users_server_users'), 0);
  for (const alias of ['a', 'b', 'c'])
    assert.equal((await put(server.url, `/users/${alias}`, { name: alias })).status, 201);
  assert.equal((await send(server.url, 'DELETE', '/users/b')).status, 204);
  assert.equal(value(await scrape(server), 'users_server_users'), 2);
});

test('users_server_reservations counts live reservations only: an expired one no longer counts', async (t) => {
  let now = Date.UTC(2026, 10, 23, 12, 0, 0);
  const server = await startTestServer(t, { reservationTtl: 60 }, { clock: () => now });
  for (let i = 0; i < 2; i++) assert.equal((await send(server.url, 'POST', '/reservations')).status, 201);
  assert.equal(value(await scrape(server), 'users_server_reservations'), 2);
  now += 30_000;
  assert.equal((await send(server.url, 'POST', '/reservations')).status, 201);
  assert.equal(value(await scrape(server), 'users_server_reservations'), 3);
  now += 31_000;
  assert.equal(value(await scrape(server), 'users_server_reservations'), 1);
  assert.equal((await put(server.url, '/users/3', { name: 'Carol' })).status, 201, 'the live reservation is used up');
  assert.equal(value(await scrape(server), 'users_server_reservations'), 0);
});

test('with the journal store, users_server_journal_bytes grows with each write and every write is covered by an observed fdatasync', async (t) => {
  const server = await startTestServer(t, { store: 'journal' });
  const before = await scrape(server);
  assert.ok(value(before, 'users_server_journal_bytes') > 0, 'the journal header counts');
  assert.equal((await put(server.url, '/users/alice', { name: 'Alice' })).status, 201);
  const after = await scrape(server);
  assert.ok(value(after, 'users_server_journal_bytes') > value(before, 'users_server_journal_bytes'));
  const syncs = (e: typeof before) => value(e, 'users_server_fsync_duration_seconds_count');
  assert.ok(syncs(after) >= syncs(before) + 1, 'the write was synced');
  assert.ok(value(after, 'users_server_fsync_duration_seconds_sum') > 0);
});

test('with --store memory, users_server_journal_bytes is 0 and no fdatasync is observed', async (t) => {
  const server = await seeded(t, { store: 'memory' });
  const e = await scrape(server);
  assert.equal(value(e, 'users_server_journal_bytes'), 0);
  assert.equal(value(e, 'users_server_fsync_duration_seconds_count'), 0);
  assert.equal(value(e, 'users_server_fsync_duration_seconds_bucket', { le: '+Inf' }), 0);
});

test('process_* metrics: resident memory and CPU time are positive, the start time is in the past', async (t) => {
  const server = await startTestServer(t);
  const e = await scrape(server);
  assert.ok(value(e, 'process_resident_memory_bytes') > 0);
  assert.ok(value(e, 'process_cpu_seconds_total') > 0);
  const start = value(e, 'process_start_time_seconds');
  assert.ok(start > 1.7e9 && start <= Date.now() / 1000, `start time ${start}`);
});

test('--require-session all: GET /metrics without a session answers 401 unauthorized with the Cookie challenge, and 200 with one', async (t) => {
  const server = await startTestServer(t, { requireSession: 'all' });
  const refused = await send(server.url, 'GET', '/metrics');
  assertProblem(refused, 401, 'unauthorized');
  assert.match(String(refused.headers['www-authenticate']), /^Cookie realm="users"/);
  const cookie = await server.login();
  await scrape(server, { cookie });
});

for (const mode of ['none', 'writes'] as const) {
  test(`--require-session ${mode}: GET /metrics needs no session`, async (t) => {
    const server = await startTestServer(t, { requireSession: mode });
    await scrape(server);
  });
}

test('Metrics: a status without a column of its own gets one, and an unusual method counts as "other"', () => {
  const metrics = new Metrics(['/a', '/b/:x']);
  metrics.count(1, 'PROPFIND', 418, 0.002);
  metrics.count(-1, 'GET', 599, undefined);
  const e = parseExposition(
    metrics.render({ users: 0, reservations: 0, journalBytes: 0, fsyncSeconds: new Histogram([0.1]) }),
  );
  assert.equal(requests(e, '/b/:x', 'other', 418), 1);
  assert.equal(requests(e, 'unmatched', 'GET', 599), 1);
  assert.equal(value(e, 'users_server_request_duration_seconds_count', { route: '/b/:x' }), 1);
  assert.equal(value(e, 'users_server_request_duration_seconds_bucket', { route: '/b/:x', le: '0.0025' }), 1);
  assert.equal(value(e, 'users_server_request_duration_seconds_bucket', { route: '/b/:x', le: '0.001' }), 0);
  assert.ok(
    !e.samples.has(key('users_server_request_duration_seconds_count', { route: 'unmatched' })),
    'no duration without a measurement',
  );
});

test('Histogram: an observation lands in the first bucket whose bound it does not exceed; past the last bound, in +Inf', () => {
  const h = new Histogram([1, 2]);
  for (const seconds of [0, 1, 1.5, 2, 3]) h.observe(seconds);
  assert.deepEqual([...h.counts], [2, 2, 1]);
  assert.equal(h.count, 5);
  assert.equal(h.sum, 7.5);
});
