/**
 * What users-server's contract costs a server that does nothing else: the
 * reference server (bench/reference-server.mjs) plain, with `--contract`
 * (X-Request-Id, ETag, Content-Location, a UTF-8 check) and with
 * `--contract --log` (plus an access log line per answer), beside
 * users-server with its access log off and on. The same GET-by-id and
 * PUT-replace loads as `npm run bench`, every server fresh each round, the
 * servers in turn on core 0 and autocannon on core 1. It prints the medians,
 * and each server's ratio to the plain reference: the rows of the contract
 * reference are the ceiling of the issue 17 targets for any server built on
 * node:http that keeps the contract.
 *
 * Run: npm run build && node --import tsx bench/reference-ceiling.ts [--rounds 3] [--seconds 5]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { JSON_HEADERS, LOAD_FLAGS, median, pinSelf, preloadUsers, putReplacing, requestPool, ROOT, runLoad, spawnServer, table, typicalName, waitForQuiet, type LoadRequest, type ServerProcess } from './store-bench.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '3' }, seconds: { type: 'string', default: '5' } } });
const ROUNDS = Number(values.rounds);
const SECONDS = Number(values.seconds);
const USERS = 10_000;
const CONNECTIONS = 50;
const REFERENCE = join(ROOT, 'bench', 'reference-server.mjs');

interface Setup {
  name: string;
  reference: boolean;
  args: string[];
}

const SETUPS: Setup[] = [
  { name: 'reference', reference: true, args: [] },
  { name: 'reference --contract', reference: true, args: ['--contract'] },
  { name: 'reference --contract --log', reference: true, args: ['--contract', '--log'] },
  { name: 'users-server --log-format off', reference: false, args: ['--log-format', 'off'] },
  { name: 'users-server (access log on)', reference: false, args: [] },
];
const LOADS = ['GET by id', 'PUT replace'] as const;
type Load = (typeof LOADS)[number];
const figures = new Map<string, { rps: number[]; cpu: number[] }>();

async function preload(server: ServerProcess, setup: Setup): Promise<void> {
  if (!setup.reference) return preloadUsers(server.url, USERS, 16);
  let n = 0;
  const requests: LoadRequest[] = [{ method: 'PUT', headers: JSON_HEADERS, setupRequest: (req) => ({ ...req, path: `/users/${++n}`, body: JSON.stringify({ name: typicalName(n) }) }) }];
  const loaded = await runLoad({ url: server.url, connections: 16, amount: USERS, requests });
  if (loaded.non2xx > 0 || loaded.errors > 0) throw new Error(`preloading ${setup.name}: ${loaded.non2xx} non-2xx, ${loaded.errors} errors`);
}

function requestsOf(load: Load): LoadRequest[] {
  if (load === 'PUT replace') return putReplacing(USERS);
  return requestPool(() => ({ method: 'GET', path: `/users/${1 + Math.floor(Math.random() * USERS)}` }));
}

pinSelf(1);
for (let round = 1; round <= ROUNDS; round++) {
  // Alternate the order so that neither end of a round always gets the quieter machine.
  for (const setup of round % 2 === 1 ? SETUPS : [...SETUPS].reverse()) {
    const dir = mkdtempSync(join(tmpdir(), 'users-ceiling-'));
    const args = setup.reference ? ['--port', '0', ...setup.args] : ['--port', '0', '--data', join(dir, 'data'), ...LOAD_FLAGS, ...setup.args];
    const server = await spawnServer(args, { core: 0, stdoutFile: join(dir, 'out'), ...(setup.reference && { script: REFERENCE }) });
    try {
      await preload(server, setup);
      for (const load of LOADS) {
        const requests = requestsOf(load);
        await waitForQuiet(10);
        await runLoad({ url: server.url, connections: CONNECTIONS, seconds: 1, requests });
        const r = await runLoad({ url: server.url, connections: CONNECTIONS, seconds: SECONDS, requests, pid: server.pid });
        if (r.non2xx > 0 || r.errors > 0) throw new Error(`${setup.name}, ${load}: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
        const key = `${setup.name}|${load}`;
        const entry = figures.get(key) ?? { rps: [], cpu: [] };
        entry.rps.push(r.rps);
        entry.cpu.push((r.serverCpu / r.rps) * 1e6);
        figures.set(key, entry);
        console.error(`round ${round} ${setup.name.padEnd(30)} ${load.padEnd(12)} ${Math.round(r.rps).toString().padStart(6)} req/s, ${((r.serverCpu / r.rps) * 1e6).toFixed(1)} µs of CPU per request`);
      }
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

for (const load of LOADS) {
  const base = figures.get(`reference|${load}`)!;
  const rows = SETUPS.map((setup) => {
    const f = figures.get(`${setup.name}|${load}`)!;
    const rps = median(f.rps);
    const cpu = median(f.cpu);
    return [setup.name, Math.round(rps).toLocaleString('en-US'), cpu.toFixed(1), (rps / median(base.rps)).toFixed(2), (median(base.cpu) / cpu).toFixed(2)];
  });
  console.log(`\n${load}, medians of ${ROUNDS} rounds of ${SECONDS} s:\n`);
  console.log(table(['server', 'req/s', 'CPU µs/req', 'req/s ratio to the reference', 'CPU ratio'], rows));
}
