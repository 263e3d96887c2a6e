/**
 * The headline throughput figures, measured and drawn: GETs by id and
 * replacing PUTs a second, 50 connections, for users-server on its journal
 * (access log on, PUTs durable), the contract reference
 * (bench/reference-server.mjs --contract --log: the cheapest node:http
 * server that keeps users-server's contract, in memory), a fastify 5 peer
 * with the same headers and log (bench/fastify-peer.mjs, in memory), and
 * users-server on PostgreSQL (one instance, fsync on; skipped without the
 * server binaries). Each server is loaded in turn by test/socket-load.ts
 * (the leanest generator here, so that it measures the servers rather than
 * itself), cycle after cycle, the order reversed every other cycle; it
 * prints the medians and writes them as an SVG bar chart.
 *
 * Run: npm run build && node --import tsx bench/throughput-chart.ts [--rounds 3] [--seconds 5]
 * [--out docs/throughput.svg]
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { postgresSkipReason, testDatabase } from '../test/postgres.js';
import { socketLoad } from '../test/socket-load.js';
import {
  LOAD_FLAGS,
  median,
  pinning,
  pinSelf,
  preloadSetup,
  preloadUsers,
  putReplacing,
  REFERENCE_SCRIPT,
  requestPool,
  ROOT,
  spawnServer,
  table,
  waitForQuiet,
  type LoadRequest,
  type ServerProcess,
} from './store-bench.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '5' },
    out: { type: 'string', default: join(ROOT, 'docs', 'throughput.svg') },
  },
});
const ROUNDS = Number(values.rounds);
const SECONDS = Number(values.seconds);
const USERS = 10_000;
const CONNECTIONS = 50;
const FASTIFY_SCRIPT = join(ROOT, 'bench', 'fastify-peer.mjs');

interface Setup {
  name: string;
  /** The bar's colour: users-server's bars stand out. */
  ours: boolean;
  start(dir: string): Promise<ServerProcess>;
  /** Users 1..USERS: through POST /users/new (users-server) or PUT /users/{n}. */
  preload(url: string): Promise<void>;
}

const peer = (name: string, script: string, args: string[]): Setup => ({
  name,
  ours: false,
  start: (dir) =>
    spawnServer(['--port', '0', ...args], {
      core: 0,
      script,
      stdoutFile: join(dir, `${name.replace(/\W+/g, '-')}.log`),
    }),
  preload: (url) => preloadSetup(url, { id: name, name, reference: true, args }, USERS, 16),
});

const users = (name: string, store: () => Promise<string>, core: number | undefined): Setup => ({
  name,
  ours: true,
  start: async (dir) =>
    spawnServer(['--port', '0', '--data', join(dir, `data-${name.length}`), '--store', await store(), ...LOAD_FLAGS], {
      core,
      stdoutFile: join(dir, `${name.replace(/\W+/g, '-')}.log`),
    }),
  preload: (url) => preloadUsers(url, USERS, 16),
});

const SETUPS: Setup[] = [
  users('users-server, journal', async () => 'journal', 0),
  peer('reference --contract --log', REFERENCE_SCRIPT, ['--contract', '--log']),
  peer('fastify 5 peer', FASTIFY_SCRIPT, []),
];
const skipPostgres = postgresSkipReason();
// Not pinned: the database's processes need a core too.
if (skipPostgres === undefined)
  SETUPS.push(users('users-server, PostgreSQL', () => testDatabase(undefined, { durable: true }), undefined));
else console.error(`users-server on PostgreSQL skipped: ${skipPostgres}`);

const LOADS = ['GET by id', 'durable PUT'] as const;
type Load = (typeof LOADS)[number];

function requestsOf(load: Load): LoadRequest[] {
  if (load === 'durable PUT') return putReplacing(USERS);
  return requestPool(() => ({ method: 'GET', path: `/users/${1 + Math.floor(Math.random() * USERS)}` }));
}

/** Requests a second of each setup under each load, one figure per cycle. */
async function measure(dir: string): Promise<Map<string, number[]>> {
  const figures = new Map<string, number[]>();
  const servers: ServerProcess[] = [];
  try {
    for (const setup of SETUPS) {
      const server = await setup.start(dir);
      servers.push(server);
      await setup.preload(server.url);
      for (const load of LOADS)
        await socketLoad({ url: server.url, connections: CONNECTIONS, seconds: 1, requests: requestsOf(load) });
    }
    for (let cycle = 1; cycle <= ROUNDS; cycle++) {
      for (const load of LOADS) {
        const order = cycle % 2 === 1 ? [...SETUPS.keys()] : [...SETUPS.keys()].reverse();
        for (const i of order) {
          await waitForQuiet(10);
          const r = await socketLoad({
            url: servers[i]!.url,
            connections: CONNECTIONS,
            seconds: SECONDS,
            requests: requestsOf(load),
          });
          if (r.non2xx > 0 || r.errors > 0)
            throw new Error(`${SETUPS[i]!.name}, ${load}: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
          const key = `${SETUPS[i]!.name}|${load}`;
          figures.set(key, [...(figures.get(key) ?? []), r.rps]);
          console.error(
            `cycle ${cycle} ${SETUPS[i]!.name.padEnd(28)} ${load.padEnd(12)} ${Math.round(r.rps).toString().padStart(6)} req/s`,
          );
        }
      }
    }
  } finally {
    for (const server of servers) await server.stop();
  }
  return figures;
}

export interface Bar {
  label: string;
  value: number;
  ours: boolean;
}

const escapeXml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A horizontal bar chart of `groups` (a title over each group's bars), with `note` under it: SVG text. */
export function barChart(
  title: string,
  groups: readonly { title: string; bars: readonly Bar[] }[],
  note: string,
): string {
  const width = 720;
  const labelWidth = 220;
  const barArea = width - labelWidth - 90;
  const barHeight = 20;
  const max = Math.max(...groups.flatMap((g) => g.bars.map((b) => b.value)));
  const parts: string[] = [];
  let y = 40;
  for (const group of groups) {
    parts.push(`<text x="10" y="${y + 14}" font-weight="bold">${escapeXml(group.title)}</text>`);
    y += 24;
    for (const bar of group.bars) {
      const length = Math.max(1, Math.round((bar.value / max) * barArea));
      parts.push(`<text x="${labelWidth - 8}" y="${y + 15}" text-anchor="end">${escapeXml(bar.label)}</text>`);
      parts.push(
        `<rect x="${labelWidth}" y="${y}" width="${length}" height="${barHeight}" fill="${bar.ours ? '#2f6db5' : '#9aa5b1'}"/>`,
      );
      parts.push(
        `<text x="${labelWidth + length + 6}" y="${y + 15}">${Math.round(bar.value).toLocaleString('en-US')}/s</text>`,
      );
      y += barHeight + 6;
    }
    y += 10;
  }
  parts.push(`<text x="10" y="${y + 12}" font-size="11" fill="#555">${escapeXml(note)}</text>`);
  const height = y + 24;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="13">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    `<text x="10" y="22" font-size="15" font-weight="bold">${escapeXml(title)}</text>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  pinSelf(1);
  const dir = mkdtempSync(join(tmpdir(), 'users-chart-'));
  let figures: Map<string, number[]>;
  try {
    figures = await measure(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const medians = (load: Load) =>
    SETUPS.map((s) => ({ label: s.name, value: median(figures.get(`${s.name}|${load}`)!), ours: s.ours }));
  console.log(
    table(
      ['server', ...LOADS],
      SETUPS.map((s, i) => [
        s.name,
        ...LOADS.map((load) => Math.round(medians(load)[i]!.value).toLocaleString('en-US')),
      ]),
    ),
  );
  const note = `bench/throughput-chart.ts, ${new Date().toISOString().slice(0, 10)}: medians of ${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections, ${pinning ? 'server and load on a core each' : 'unpinned'}, Node ${process.versions.node}`;
  writeFileSync(
    values.out,
    barChart(
      'Requests per second (higher is better)',
      LOADS.map((load) => ({
        title:
          load === 'durable PUT' ? 'PUT replacing a user (users-server: durable; the peers: in memory)' : 'GET by id',
        bars: medians(load),
      })),
      note,
    ),
  );
  console.log(`\nwrote ${values.out}`);
}

if (process.argv[1]?.endsWith('throughput-chart.ts')) await main();
