/**
 * usersctl's errors name their object and the next step in its own terms:
 * the ref, the URL asked, the file with its line and column, the flag; a
 * bad local file is a usage error (exit 2). users-server's --config names
 * the place where its file stops being JSON.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { EXIT } from '../cli/main.js';
import { lines, startCliServer, usersctl } from './cli-helpers.js';
import { runTool } from './processes.js';
import { runUsersServer, tempDir } from './helpers.js';

test('usersctl get of a ref the server does not know names the ref (exit 3)', async (t) => {
  const cli = await startCliServer(t);
  const got = await cli.run(['get', '999']);
  assert.equal(got.code, EXIT.notFound);
  assert.equal(got.stderr, 'usersctl: 999: No such user.\n');
});

test('usersctl with --url at a path the server does not serve names the URL it asked and says what --url must be', async (t) => {
  const cli = await startCliServer(t);
  const got = await cli.run(['--url', `${cli.server.url}/api`, 'get', '1']);
  assert.equal(got.code, EXIT.notFound);
  assert.equal(
    got.stderr,
    `usersctl: there is nothing at ${cli.server.url}/api/users/1: --url must be the server's address (it serves /users, /login, ...)\n`,
  );
});

test('usersctl put -f FILE with a file that is not JSON is a usage error (exit 2) naming the file, line and column; nothing is sent', async (t) => {
  const cli = await startCliServer(t);
  const file = join(tempDir(t), 'bad.json');
  writeFileSync(file, '{"name":\n  bad}');
  const got = await cli.run(['put', 'eve', '-f', file]);
  assert.equal(got.code, EXIT.usage);
  assert.match(
    got.stderr,
    new RegExp(
      `^usersctl: ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} is not JSON at line 2, column 3 \\(.+\\); fix it and run the command again\\n$`,
    ),
  );
  assert.equal((await cli.run(['get', 'eve'])).code, EXIT.notFound, 'the bad file created a user');
});

test('usersctl --url without a scheme says to add http:// (exit 2)', async () => {
  const got = await usersctl(['--url', '127.0.0.1:8080', 'get', '1']);
  assert.equal(got.code, EXIT.usage);
  assert.equal(got.stderr, 'usersctl: --url: 127.0.0.1:8080 has no scheme: give http://127.0.0.1:8080 (or https://)\n');
});

test('usersctl put of an id never issued names the id and suggests usersctl reserve, not an HTTP request', async (t) => {
  const cli = await startCliServer(t);
  const got = await cli.run(['put', '999', '--name', 'X']);
  assert.equal(got.code, EXIT.notFound);
  assert.equal(
    got.stderr,
    'usersctl: The id 999 was never issued: reserve one with `usersctl reserve`, or PUT under an alias.\n',
  );
});

test('users-server --config FILE that is not JSON names the line and column (exit 2)', async (t) => {
  const file = join(tempDir(t), 'config.json');
  writeFileSync(file, '{\n  "port": 8081,\n}\n');
  const got = await runUsersServer(['--config', file]);
  assert.equal(got.code, 2);
  assert.match(
    got.stderr,
    new RegExp(
      `^users-server: --config ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: not JSON at line 3, column 1 \\(.+\\) \\(see users-server --help\\)\\n$`,
    ),
  );
});

test('failures are plain sentences with a next step, never a raw errno or OpenSSL text (a folder given as a file to put, new or import, a missing file, a folder as the jar, https to an http port, a self-signed certificate)', async (t) => {
  const cli = await startCliServer(t);
  const server = cli.server;
  const folder = tempDir(t);
  const cases: [string[], number, RegExp][] = [
    [['put', 'x', '-f', folder], EXIT.usage, /is a folder, not a file; give the path of a file$/],
    [['import', '-f', join(folder, 'missing.ndjson')], EXIT.usage, /missing\.ndjson does not exist; check the path$/],
    [['import', '-f', folder], EXIT.usage, /is a folder, not a file; give the path of a file$/],
    [['new', '-f', folder], EXIT.usage, /is a folder, not a file; give the path of a file$/],
    [
      ['--cookie-jar', folder, 'get', '1'],
      EXIT.unexpected,
      /^usersctl: the cookie jar: .* is a folder, not a file; .*--cookie-jar\)$/,
    ],
    [
      ['--url', server.url.replace('http:', 'https:'), 'get', '1'],
      EXIT.network,
      /does not speak TLS on that port; try http:\/\/ instead of https:\/\/ in --url$/,
    ],
  ];
  const openssl = await runTool(t, 'openssl', ['version']).catch(() => undefined);
  if (openssl?.code === 0) {
    const key = join(folder, 'key.pem');
    const cert = join(folder, 'cert.pem');
    await runTool(t, 'openssl', [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
    ]);
    const tls = createTlsServer({ key: readFileSync(key), cert: readFileSync(cert) }, (_req, res) => res.end('{}'));
    await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
    t.after(() => new Promise<void>((resolve) => tls.close(() => resolve())));
    cases.push([
      ['--url', `https://127.0.0.1:${(tls.address() as AddressInfo).port}`, 'get', '1'],
      EXIT.network,
      /is not signed by an authority this machine trusts; if it is your own, set NODE_EXTRA_CA_CERTS to its CA's PEM file$/,
    ]);
  }
  for (const [args, code, message] of cases) {
    const result = await cli.run(args);
    assert.equal(result.code, code, `${args.join(' ')}: ${result.stderr}`);
    const [line, ...more] = lines(result.stderr);
    assert.deepEqual(more, [], 'one line');
    assert.match(line!, message);
    assert.doesNotMatch(line!, /\bE[A-Z]{3,}\b|SSL|routines|errno/, `a raw error code in: ${line}`);
  }
});
