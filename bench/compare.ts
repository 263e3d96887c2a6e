/**
 * Two builds of users-server side by side: the same load against each,
 * alternating A B, B A, ... on fresh servers, with the server's CPU time per
 * request read from /proc. What a change costs or saves on one path, with
 * the machine's noise spread over both.
 *
 * Run: node --import tsx bench/compare.ts --a OLD_CHECKOUT --b NEW_CHECKOUT
 *        [--scenario get|root|put] [--rounds 6] [--seconds 5]
 *        [--a-flag F ...] [--b-flag F ...] [-- SERVER FLAGS]
 * Each checkout must be built (`npm run build` there). For a PUT without the
 * disk's noise, pass `-- --store memory`. Flags after `--` go to both
 * servers; `--a-flag` and `--b-flag` (repeatable) to one side only, so one
 * build can be compared with itself: `--a . --b . --b-flag=--log-format
 * --b-flag=off` measures what the access log costs.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  ADMIN_PASSWORD,
  LOAD_FLAGS,
  median,
  pinSelf,
  preloadUsers,
  putReplacing,
  requestPool,
  runLoad,
  spawnServer,
  type LoadRequest,
} from './store-bench.js';

const { values, positionals } = parseArgs({
  options: {
    a: { type: 'string' },
    b: { type: 'string' },
    'a-flag': { type: 'string', multiple: true, default: [] },
    'b-flag': { type: 'string', multiple: true, default: [] },
    scenario: { type: 'string', default: 'get' },
    rounds: { type: 'string', default: '6' },
    seconds: { type: 'string', default: '5' },
  },
  allowPositionals: true,
});
if (values.a === undefined || values.b === undefined || !['get', 'root', 'put'].includes(values.scenario)) {
  console.error(
    'usage: node --import tsx bench/compare.ts --a CHECKOUT --b CHECKOUT [--scenario get|root|put] [--rounds N] [--seconds S] [-- SERVER FLAGS]',
  );
  process.exit(2);
}
const USERS = 1000;
const builds = {
  A: join(resolve(values.a), 'bin', 'users-server.js'),
  B: join(resolve(values.b), 'bin', 'users-server.js'),
};
const flags = {
  A: [...loadFlagsOf(values.a), ...values['a-flag'], ...positionals],
  B: [...loadFlagsOf(values.b), ...values['b-flag'], ...positionals],
};
const figures = { A: { rps: [] as number[], cpu: [] as number[] }, B: { rps: [] as number[], cpu: [] as number[] } };
pinSelf(1);

/**
 * LOAD_FLAGS lift the limit on connections per client; a build from before
 * that limit (2026-11-25) has neither the limit nor the flag. The options
 * live in server/ops/config.ts, in server/config.ts before the layers.
 */
function loadFlagsOf(checkout: string): string[] {
  const candidates = [join('server', 'ops', 'config.js'), join('server', 'config.js')].map((file) =>
    join(resolve(checkout), 'dist', file),
  );
  const knows = candidates.some(
    (file) => existsSync(file) && readFileSync(file, 'utf8').includes('max-connections-per-client'),
  );
  return knows ? LOAD_FLAGS : [];
}

async function requestsFor(url: string): Promise<LoadRequest[]> {
  if (values.scenario === 'get')
    return requestPool(() => ({ method: 'GET', path: `/users/${1 + Math.floor(Math.random() * USERS)}` }));
  if (values.scenario === 'put') return putReplacing(USERS);
  const login = await fetch(`${url}/login`, {
    method: 'POST',
    headers: { authorization: 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64') },
  });
  return [{ method: 'GET', path: '/', headers: { cookie: (login.headers.get('set-cookie') ?? '').split(';')[0]! } }];
}

for (let round = 0; round < Number(values.rounds); round++) {
  for (const label of round % 2 === 0 ? (['A', 'B'] as const) : (['B', 'A'] as const)) {
    const dir = mkdtempSync(join(tmpdir(), 'users-compare-'));
    const server = await spawnServer(['--port', '0', '--data', join(dir, 'data'), ...flags[label]], {
      core: 0,
      script: builds[label],
      stdoutFile: join(dir, 'out'),
    });
    try {
      await preloadUsers(server.url, USERS, 16);
      const requests = await requestsFor(server.url);
      await runLoad({ url: server.url, connections: 50, seconds: 2, requests });
      const r = await runLoad({
        url: server.url,
        connections: 50,
        seconds: Number(values.seconds),
        requests,
        pid: server.pid,
      });
      figures[label].rps.push(r.rps);
      figures[label].cpu.push((r.serverCpu / r.rps) * 1e6);
      console.error(
        `round ${round + 1} ${label}: ${Math.round(r.rps)} req/s, ${((r.serverCpu / r.rps) * 1e6).toFixed(1)} µs of server CPU per request`,
      );
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
const a = { rps: median(figures.A.rps), cpu: median(figures.A.cpu) };
const b = { rps: median(figures.B.rps), cpu: median(figures.B.cpu) };
console.log(
  `${values.scenario}, medians over ${values.rounds} rounds: A ${Math.round(a.rps)} req/s ${a.cpu.toFixed(1)} µs/req; B ${Math.round(b.rps)} req/s ${b.cpu.toFixed(1)} µs/req`,
);
console.log(`B/A: req/s ${(b.rps / a.rps).toFixed(3)}, CPU per request ${(b.cpu / a.cpu).toFixed(3)}`);
