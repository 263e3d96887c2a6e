/**
 * What users-server's contract costs a server that does nothing else: the
 * reference server (bench/reference-server.mjs) plain, with `--contract`
 * (X-Request-Id, ETag, Content-Location, a UTF-8 check) and with
 * `--contract --log` (plus an access log line per answer), beside
 * users-server with its access log off and on. The same GET-by-id and
 * PUT-replace loads as `npm run bench`, the servers on core 0, each loaded
 * in turn, and autocannon on core 1. It prints the medians, and each
 * server's ratio to the plain reference: the rows of the contract reference
 * are the ceiling of the issue 17 targets for any server built on node:http
 * that keeps the contract.
 *
 * Run: npm run build && node --import tsx bench/reference-ceiling.ts [--rounds 10] [--seconds 3]
 * (--rounds: cycles over the five servers and two loads)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  CEILING_SETUPS,
  LOAD_FLAGS,
  median,
  pinSelf,
  preloadSetup,
  putReplacing,
  requestPool,
  REFERENCE_SCRIPT,
  runLoad,
  spawnServer,
  table,
  waitForQuiet,
  type LoadRequest,
  type ServerProcess,
} from './store-bench.js';

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '10' }, seconds: { type: 'string', default: '3' } },
});
const ROUNDS = Number(values.rounds);
const SECONDS = Number(values.seconds);
const USERS = 10_000;
const CONNECTIONS = 50;

const LOADS = ['GET by id', 'PUT replace'] as const;
type Load = (typeof LOADS)[number];
const figures = new Map<string, { rps: number[]; cpu: number[] }>();

function requestsOf(load: Load): LoadRequest[] {
  if (load === 'PUT replace') return putReplacing(USERS);
  return requestPool(() => ({ method: 'GET', path: `/users/${1 + Math.floor(Math.random() * USERS)}` }));
}

pinSelf(1);
// All five servers run for the whole measurement, each loaded in turn (the
// others idle), cycle after cycle, the order reversed every other cycle:
// this machine's speed drifts by a third over minutes, and a ratio taken
// within one cycle sees little of that drift.
const dir = mkdtempSync(join(tmpdir(), 'users-ceiling-'));
const servers: ServerProcess[] = [];
try {
  for (const [i, setup] of CEILING_SETUPS.entries()) {
    const args = setup.reference
      ? ['--port', '0', ...setup.args]
      : ['--port', '0', '--data', join(dir, `data-${i}`), ...LOAD_FLAGS, ...setup.args];
    const server = await spawnServer(args, {
      core: 0,
      stdoutFile: join(dir, `out-${i}`),
      ...(setup.reference && { script: REFERENCE_SCRIPT }),
    });
    servers.push(server);
    await preloadSetup(server.url, setup, USERS, 16);
    for (const load of LOADS)
      await runLoad({ url: server.url, connections: CONNECTIONS, seconds: 1, requests: requestsOf(load) });
  }
  for (let cycle = 1; cycle <= ROUNDS; cycle++) {
    for (const load of LOADS) {
      const requests = requestsOf(load);
      const order = cycle % 2 === 1 ? [...CEILING_SETUPS.keys()] : [...CEILING_SETUPS.keys()].reverse();
      for (const i of order) {
        const setup = CEILING_SETUPS[i]!;
        const server = servers[i]!;
        await waitForQuiet(10);
        const r = await runLoad({
          url: server.url,
          connections: CONNECTIONS,
          seconds: SECONDS,
          requests,
          pid: server.pid,
        });
        if (r.non2xx > 0 || r.errors > 0)
          throw new Error(`${setup.name}, ${load}: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
        const key = `${setup.name}|${load}`;
        const entry = figures.get(key) ?? { rps: [], cpu: [] };
        entry.rps.push(r.rps);
        entry.cpu.push((r.serverCpu / r.rps) * 1e6);
        figures.set(key, entry);
        console.error(
          `cycle ${cycle} ${setup.name.padEnd(30)} ${load.padEnd(12)} ${Math.round(r.rps).toString().padStart(6)} req/s, ${((r.serverCpu / r.rps) * 1e6).toFixed(1)} µs of CPU per request`,
        );
      }
    }
  }
} finally {
  for (const server of servers) await server.stop();
  rmSync(dir, { recursive: true, force: true });
}

for (const load of LOADS) {
  const base = figures.get(`reference|${load}`)!;
  const rows = CEILING_SETUPS.map((setup) => {
    const f = figures.get(`${setup.name}|${load}`)!;
    // The median of the cycles' ratios, each taken within one cycle.
    const rpsRatio = median(f.rps.map((rps, i) => rps / base.rps[i]!));
    const cpuRatio = median(f.cpu.map((cpu, i) => base.cpu[i]! / cpu));
    return [
      setup.name,
      Math.round(median(f.rps)).toLocaleString('en-US'),
      median(f.cpu).toFixed(1),
      rpsRatio.toFixed(2),
      cpuRatio.toFixed(2),
    ];
  });
  console.log(
    `\n${load}, ${ROUNDS} cycles of ${SECONDS} s per server (medians; ratios: the median of each cycle's ratio to the plain reference):\n`,
  );
  console.log(table(['server', 'req/s', 'CPU µs/req', 'req/s ratio', 'CPU ratio'], rows));
}
