/**
 * How long usersctl takes to start (issue 20, "Fast to start"): the wall
 * time of `usersctl --version` and `usersctl get 1` (with and without a
 * cookie jar), side by side with `node -e 0` and `curl` doing the same GET,
 * each the median of N runs on this machine. Prints the figures; asserts
 * nothing.
 *
 * Run: npm run build && node --import tsx bench/cli-start.ts [--runs 20]
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ROOT, spawnServer } from './store-bench.js';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '20' } } });
const RUNS = Number(values.runs);
const CLI = join(ROOT, 'bin', 'usersctl.js');

/** Median wall time in ms of `command args`, run RUNS times. */
function median(command: string, args: string[], env: NodeJS.ProcessEnv): number {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    const result = spawnSync(command, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
    times.push(performance.now() - started);
    if (result.status !== 0) throw new Error(`${command} ${args.join(' ')}: exit ${result.status}: ${result.stderr}`);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

const dir = mkdtempSync(join(tmpdir(), 'users-cli-start-'));
const server = await spawnServer(['--port', '0', '--data', join(dir, 'data'), '--log-format', 'off']);
try {
  spawnSync('curl', [
    '-s',
    '-X',
    'PUT',
    '-H',
    'content-type: application/json',
    '-d',
    '{"name":"One"}',
    `${server.url}/users/one`,
  ]);
  const noJar = {
    ...process.env,
    HOME: join(dir, 'home'),
    XDG_STATE_HOME: join(dir, 'state'),
    USERSCTL_URL: server.url,
  };
  const jar = join(dir, 'cookies.txt');
  writeFileSync(jar, '# Netscape HTTP Cookie File\n127.0.0.1\tFALSE\t/\tFALSE\t0\tother\tx\n');
  const withJar = { ...noJar, USERSCTL_COOKIE_JAR: jar };
  const rows: [string, number][] = [
    ['node -e 0', median(process.execPath, ['-e', '0'], noJar)],
    ['curl GET /users/1', median('curl', ['-s', `${server.url}/users/1`], noJar)],
    ['usersctl --version', median(process.execPath, [CLI, '--version'], noJar)],
    ['usersctl get 1 (no jar file)', median(process.execPath, [CLI, 'get', '1'], noJar)],
    ['usersctl get 1 (a jar file)', median(process.execPath, [CLI, 'get', '1'], withJar)],
  ];
  console.log(`wall time, median of ${RUNS} runs`);
  for (const [name, ms] of rows) console.log(`${name.padEnd(30)} ${ms.toFixed(0).padStart(5)} ms`);
} finally {
  server.child.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
}
