/**
 * deploy/ and the npm package (issue 21 "Deployment"): the systemd unit and
 * the Dockerfile say what an operator relies on, their commands start the
 * real server, their tools accept them where the tools exist
 * (`systemd-analyze verify`, `docker build`); `npm pack` ships what a user
 * needs and nothing that points at files it leaves out.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { send, tempDir } from './helpers.js';
import { runTool, spawnChild } from './processes.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const UNIT = readFileSync(join(ROOT, 'deploy', 'users-server.service'), 'utf8');
const DOCKERFILE = readFileSync(join(ROOT, 'deploy', 'Dockerfile'), 'utf8');

/** The unit's `Key=value` settings, last one wins, as systemd reads them. */
function directives(unit: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const line of unit.split('\n')) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line);
    if (m) found.set(m[1]!, m[2]!);
  }
  return found;
}

test('deploy/users-server.service: a dedicated user, StateDirectory, ProtectSystem=strict, NoNewPrivileges, restart on failure, stop by SIGTERM, node run directly (not npm)', () => {
  const d = directives(UNIT);
  assert.equal(d.get('DynamicUser'), 'yes');
  assert.equal(d.get('StateDirectory'), 'users-server');
  assert.equal(d.get('ProtectSystem'), 'strict');
  assert.equal(d.get('NoNewPrivileges'), 'yes');
  assert.equal(d.get('Restart'), 'on-failure');
  assert.equal(d.get('KillSignal'), 'SIGTERM');
  assert.match(
    d.get('ExecStart')!,
    /^\/usr\/bin\/node \/opt\/users-server\/bin\/users-server\.js --data \/var\/lib\/users-server /,
  );
  assert.ok(!/npm (start|run)/.test(d.get('ExecStart')!), 'npm would not pass SIGTERM on');
});

test('systemd-analyze verify accepts deploy/users-server.service', async (t) => {
  if (spawnSync('systemd-analyze', ['--version']).status !== 0) return t.skip('systemd-analyze not found');
  const run = await runTool(t, 'systemd-analyze', ['verify', join(ROOT, 'deploy', 'users-server.service')]);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.stderr.trim(), '', 'no warnings');
});

test("the unit's ExecStart, run with the checkout for /opt/users-server and a temp folder for /var/lib, serves /healthz and stops on SIGTERM with exit 0", async (t) => {
  const state = tempDir(t);
  const args = directives(UNIT)
    .get('ExecStart')!
    .split(' ')
    .slice(1)
    .map((a) => a.replace('/opt/users-server', ROOT.replace(/\/$/, '')).replace('/var/lib/users-server', state))
    .map((a) => (a === '8080' ? '0' : a));
  const child = spawnChild(t, process.execPath, args, { env: { ...process.env, USERS_PASSWORD_COST: '1' } });
  const line = await child.waitForLine(/^listening on (http:\/\/\S+)$/);
  assert.equal((await send(line[1]!, 'GET', '/healthz')).status, 200);
  assert.ok(existsSync(join(state, 'admin-password')), 'the data lives in the state directory');
  child.kill('SIGTERM');
  assert.deepEqual(await child.exited, { code: 0, signal: null });
});

test('deploy/Dockerfile: Node 24 slim, a non-root user, a volume for the data, HEALTHCHECK on /healthz, STOPSIGNAL SIGTERM, node as the entry point, no node_modules in the image', async (t) => {
  assert.match(DOCKERFILE, /^FROM node:24-slim AS build$/m);
  assert.match(DOCKERFILE, /^FROM node:24-slim$/m);
  assert.match(DOCKERFILE, /^USER node$/m);
  assert.match(DOCKERFILE, /^VOLUME \/data$/m);
  assert.match(DOCKERFILE, /^STOPSIGNAL SIGTERM$/m);
  assert.match(DOCKERFILE, /^ENTRYPOINT \["node", "bin\/users-server\.js"\]$/m);
  const runtime = DOCKERFILE.slice(DOCKERFILE.lastIndexOf('FROM '));
  assert.ok(
    !runtime.includes('node_modules') && !/npm (ci|install)/.test(runtime),
    'the runtime stage installs nothing',
  );
  // The HEALTHCHECK's own command, against a real server (its address put in for 127.0.0.1:8080).
  const check = /HEALTHCHECK [^\n]*\\\n\s+CMD \["node", "-e", "(.*)"\]$/m.exec(DOCKERFILE);
  assert.ok(check !== null, 'a HEALTHCHECK running node -e');
  const server = spawnChild(
    t,
    process.execPath,
    [join(ROOT, 'bin', 'users-server.js'), '--port', '0', '--data', tempDir(t)],
    { env: { ...process.env, USERS_PASSWORD_COST: '1' } },
  );
  const url = (await server.waitForLine(/^listening on (http:\/\/\S+)$/))[1]!;
  const healthy = await runTool(t, process.execPath, ['-e', check[1]!.replaceAll('http://127.0.0.1:8080', url)]);
  assert.equal(healthy.code, 0, healthy.stderr);
  server.kill('SIGTERM');
  await server.exited;
  const down = await runTool(t, process.execPath, ['-e', check[1]!.replaceAll('http://127.0.0.1:8080', url)]);
  assert.equal(down.code, 1, 'unhealthy once the server is gone');
});

test('docker build -f deploy/Dockerfile . builds the image', async (t) => {
  if (spawnSync('docker', ['info'], { timeout: 20_000 }).status !== 0)
    return t.skip('no reachable docker daemon (docker info fails)');
  const run = await runTool(t, 'docker', [
    'build',
    '-f',
    join(ROOT, 'deploy', 'Dockerfile'),
    '-t',
    'users-server-test',
    ROOT,
  ]);
  assert.equal(run.code, 0, run.stderr);
});

test('npm pack ships LICENSE, the README, docs/, deploy/, the man pages, bin/ and the built server and usersctl, no sources or tests, and no source map that points at a file it leaves out', async (t) => {
  const pack = await runTool(t, 'npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    env: { ...process.env, npm_config_loglevel: 'silent' },
  });
  assert.equal(pack.code, 0, pack.stderr);
  const files = new Set((JSON.parse(pack.stdout) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path));
  const must = [
    'LICENSE',
    'README.md',
    'package.json',
    'bin/users-server.js',
    'bin/usersctl.js',
    'dist/users-server/main.js',
    'dist/usersctl/main.js',
    'dist/man/usersctl.1',
    'dist/man/users-server.1',
    'deploy/users-server.service',
    'deploy/Dockerfile',
  ];
  for (const doc of readdirSync(join(ROOT, 'docs'))) must.push(`docs/${doc}`);
  for (const path of must) assert.ok(files.has(path), `the package lacks ${path}`);
  for (const path of files)
    assert.ok(
      !/^(server|cli|shared|test|bench|\.ci)\//.test(path) && !path.endsWith('.ts'),
      `the package ships ${path}`,
    );
  for (const path of files) {
    if (!path.endsWith('.map')) continue;
    const map = JSON.parse(readFileSync(join(ROOT, path), 'utf8')) as {
      sources: string[];
      sourcesContent?: (string | null)[];
    };
    map.sources.forEach((source, i) => {
      const shipped = files.has(join(path, '..', source).replace(/^\.\//, ''));
      assert.ok(
        shipped || typeof map.sourcesContent?.[i] === 'string',
        `${path} points at ${source}, which the package leaves out, without its content`,
      );
    });
  }
});
