/**
 * The admin password's one lifecycle, as an operator lives it through
 * users-server's command line on both stores (the servers in process; one
 * `accounts passwd` and the copies through the executable): the generated password, `accounts passwd
 * admin` while servers run, `copy` in each direction, and the rule that
 * nothing derived from a password (a record line, a hash) logs in as one.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { newAccountId, serializeAccount } from '../server/security/accounts-file.js';
import { hashPassword } from '../server/security/credentials.js';
import { basic, cookiePair, runUsersServer, send, startTestServer, startUsersServer, tempDir } from './helpers.js';
import { postgresSkipReason, testDatabase } from './postgres.js';
import { beyondDataLine, cleanEnv, runTool, SERVER_BIN } from './processes.js';

const NEW_PASSWORD = 'the admin password, chosen';
const GENERATED = { USERS_ADMIN_PASSWORD: undefined };
const skipPostgres = postgresSkipReason();

const login = (url: string, password: string) =>
  send(url, 'POST', '/login', { headers: { authorization: basic('admin', password) } });
const rootStatus = async (url: string, cookie: string) => (await send(url, 'GET', '/', { headers: { cookie } })).status;

/** `users-server ARGS` (a command that ends: accounts, copy), with `input` on stdin. */
function usersServer(_t: TestContext, args: string[], input = '') {
  return runUsersServer(args, { stdin: input, env: { USERS_ADMIN_PASSWORD: '' } });
}

/**
 * The same through `node bin/users-server.js ARGS`: the stories of `accounts passwd` and `copy` as the executable runs
 * them.
 */
function usersServerBin(t: TestContext, args: string[], input = '') {
  return runTool(t, process.execPath, [SERVER_BIN, ...args], {
    input,
    env: { ...cleanEnv(), USERS_PASSWORD_COST: '1', USERS_ADMIN_PASSWORD: '' },
  });
}

/** `users-server --port 0 ARGS` in process, with the generated admin password unless `env` gives one. */
function serve(t: TestContext, args: string[], options: { env: NodeJS.ProcessEnv }) {
  return startUsersServer(t, args, options);
}

type Server = Awaited<ReturnType<typeof serve>>;

async function stop(server: Server): Promise<void> {
  server.kill('SIGTERM');
  assert.equal((await server.exited).code, 0, server.stderr());
}

/** The generated password the database holds, read as docs/scaling.md tells. */
async function databasePassword(url: string): Promise<string | undefined> {
  const { connect } = await import('../server/store/postgres/driver.js');
  const sql = await connect(url, { max: 1 });
  try {
    const [row] = await sql`select value from settings where name = 'admin-password'`;
    return row?.value as string | undefined;
  } finally {
    await sql.end();
  }
}

/**
 * Every running server takes the changed password at once for logins, and
 * ends the admin's sessions: the old password and every line on disk are
 * refused.
 */
async function assertChanged(
  urls: readonly string[],
  old: string,
  session: string,
  refusedLines: readonly string[],
): Promise<void> {
  for (const url of urls) {
    assert.equal((await login(url, old)).status, 401, `${url}: the old password still logs in`);
    assert.equal((await login(url, NEW_PASSWORD)).status, 200, `${url}: the new password is refused`);
    assert.equal(await rootStatus(url, session), 401, `${url}: the admin's old session still works`);
    for (const line of refusedLines)
      assert.equal((await login(url, line)).status, 401, `${url}: a stored line logs in: ${line}`);
  }
}

test("admin password, journal: the generated one is in <data>/admin-password; accounts passwd admin while the server runs takes effect at once, ends the admin's sessions and removes the file; the restart says nothing of it", async (t) => {
  const data = tempDir(t);
  const server = await serve(t, ['--port', '0', '--data', data], { env: GENERATED });
  const file = join(data, 'admin-password');
  assert.ok(
    server
      .stderr()
      .includes(
        `first login: usersctl --url ${server.url} login --password-stdin < ${file} (then change it: users-server accounts passwd admin --data ${data})`,
      ),
    server.stderr(),
  );
  const generated = readFileSync(file, 'utf8').trim();
  const session = cookiePair((await login(server.url, generated)).headers['set-cookie']);

  const changed = await usersServer(
    t,
    ['accounts', 'passwd', 'admin', '--data', data, '--password-stdin'],
    NEW_PASSWORD + '\n',
  );
  assert.equal(changed.code, 0, changed.stderr);
  assert.ok(!existsSync(file), 'the generated password is still on disk');
  const accountsLines = readFileSync(join(data, 'accounts'), 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{"name"'));
  await assertChanged(
    [server.url],
    generated,
    session,
    accountsLines.map((l) => l.replace(/,$/, '')),
  );
  await stop(server);

  const again = await serve(t, ['--port', '0', '--data', data], { env: GENERATED });
  assert.equal(beyondDataLine(again.stderr()), '', 'the start still points at a password file');
  assert.ok(!existsSync(file), 'the restart generated a password again');
  assert.equal((await login(again.url, NEW_PASSWORD)).status, 200);
  await stop(again);
});

test('admin password, journal: a data directory whose admin-password holds a record line (as earlier versions wrote it) logs in with the password, never with the line, and the line moves into the accounts', async (t) => {
  const data = tempDir(t);
  const first = await serve(t, ['--port', '0', '--data', data], { env: GENERATED });
  await stop(first);
  const record = {
    name: 'admin',
    role: 'admin' as const,
    id: newAccountId(),
    created: new Date().toISOString(),
    password: await hashPassword(NEW_PASSWORD, { cost: 1 }),
  };
  const line = serializeAccount(record);
  writeFileSync(join(data, 'admin-password'), line + '\n', { mode: 0o600 });
  const server = await serve(t, ['--port', '0', '--data', data], { env: GENERATED });
  assert.equal(beyondDataLine(server.stderr()), '');
  assert.equal((await login(server.url, line)).status, 401, 'the record line logs in');
  assert.equal((await login(server.url, NEW_PASSWORD)).status, 200);
  assert.ok(!existsSync(join(data, 'admin-password')));
  assert.ok(readFileSync(join(data, 'accounts'), 'utf8').includes(record.id), 'the record is not in the accounts');
  await stop(server);
});

test("admin password, PostgreSQL: accounts passwd admin --store URL while two instances run: both take it at once, the admin's sessions end, the generated password leaves the database, and no start points at it again", async (t) => {
  if (skipPostgres !== undefined) return t.skip(skipPostgres);
  const url = await testDatabase(t);
  const a = await serve(t, ['--port', '0', '--store', url], { env: GENERATED });
  const b = await serve(t, ['--port', '0', '--store', url], { env: GENERATED });
  const hint = (server: Server) =>
    `first login: psql '${url}' -Atc "select value from settings where name = 'admin-password'" | usersctl --url ${server.url} login --password-stdin (then change it: users-server accounts passwd admin --store URL)`;
  assert.ok(a.stderr().includes(hint(a)), a.stderr());
  assert.ok(b.stderr().includes(hint(b)), 'the second instance says where the password is too');
  const generated = (await databasePassword(url))!;
  // The line works as printed: the command before the pipe prints the password.
  if ((await runTool(t, 'sh', ['-c', 'command -v psql'])).code === 0) {
    const printed = await runTool(t, 'bash', ['-c', hint(a).slice('first login: '.length).split(' | ')[0]!], {
      env: process.env,
    });
    assert.equal(printed.stdout.trim(), generated, printed.stderr);
  }
  const session = cookiePair((await login(b.url, generated)).headers['set-cookie']);
  assert.equal(await rootStatus(a.url, session), 200);

  const changed = await usersServerBin(
    t,
    ['accounts', 'passwd', 'admin', '--store', url, '--password-stdin'],
    NEW_PASSWORD + '\n',
  );
  assert.equal(changed.code, 0, changed.stderr);
  assert.equal(await databasePassword(url), undefined, 'the generated password is still in the database');
  await assertChanged([a.url, b.url], generated, session, []);
  await stop(a);
  const c = await serve(t, ['--port', '0', '--store', url], { env: GENERATED });
  assert.equal(beyondDataLine(c.stderr()), '');
  assert.equal((await login(c.url, NEW_PASSWORD)).status, 200);
});

test('admin password, copy both ways: a changed password crosses from a data directory to PostgreSQL and back; the generated one does not come back, and no record line logs in', async (t) => {
  if (skipPostgres !== undefined) return t.skip(skipPostgres);
  const data = tempDir(t);
  const first = await serve(t, ['--port', '0', '--data', data], { env: GENERATED });
  const generated = readFileSync(join(data, 'admin-password'), 'utf8').trim();
  await stop(first);
  assert.equal(
    (await usersServer(t, ['accounts', 'passwd', 'admin', '--data', data, '--password-stdin'], NEW_PASSWORD + '\n'))
      .code,
    0,
  );
  const recordLine = readFileSync(join(data, 'accounts'), 'utf8')
    .split('\n')
    .find((l) => l.startsWith('{"name":"admin"'))!
    .replace(/,$/, '');

  const url = await testDatabase(t, { migrated: false });
  const there = await usersServerBin(t, ['copy', '--from', data, '--to', url]);
  assert.equal(there.code, 0, there.stderr);
  assert.equal(await databasePassword(url), undefined, 'copy wrote a generated password');
  const db = await serve(t, ['--port', '0', '--store', url], { env: GENERATED });
  assert.equal(beyondDataLine(db.stderr()), '');
  for (const refused of [generated, recordLine]) assert.equal((await login(db.url, refused)).status, 401, refused);
  assert.equal((await login(db.url, NEW_PASSWORD)).status, 200);
  await stop(db);

  const back = tempDir(t);
  const returned = await usersServerBin(t, ['copy', '--from', url, '--to', back]);
  assert.equal(returned.code, 0, returned.stderr);
  assert.ok(!existsSync(join(back, 'admin-password')));
  const again = await serve(t, ['--port', '0', '--data', back], { env: GENERATED });
  assert.equal(beyondDataLine(again.stderr()), '');
  for (const refused of [generated, recordLine]) assert.equal((await login(again.url, refused)).status, 401, refused);
  assert.equal((await login(again.url, NEW_PASSWORD)).status, 200);
  await stop(again);
});

test('admin password, copy of a data directory whose admin-password holds a record line (earlier versions): the database gets the record as an account, not as a password', async (t) => {
  if (skipPostgres !== undefined) return t.skip(skipPostgres);
  const data = tempDir(t);
  await stop(await serve(t, ['--port', '0', '--data', data], { env: GENERATED }));
  const line = serializeAccount({
    name: 'admin',
    role: 'admin',
    id: newAccountId(),
    created: new Date().toISOString(),
    password: await hashPassword(NEW_PASSWORD, { cost: 1 }),
  });
  writeFileSync(join(data, 'admin-password'), line + '\n', { mode: 0o600 });
  const url = await testDatabase(t, { migrated: false });
  const copied = await usersServer(t, ['copy', '--from', data, '--to', url]);
  assert.equal(copied.code, 0, copied.stderr);
  assert.equal(await databasePassword(url), undefined);
  const db = await serve(t, ['--port', '0', '--store', url], { env: GENERATED });
  assert.equal((await login(db.url, line)).status, 401, 'the record line logs in');
  assert.equal((await login(db.url, NEW_PASSWORD)).status, 200);
  await stop(db);
});

/** A server on `store` whose admin password is `password` (undefined: the generated one), and an admin session. */
async function adminServer(t: TestContext, store: { data?: string; store?: string }, password: string | undefined) {
  const server = await startTestServer(t, store, { env: { USERS_ADMIN_PASSWORD: password } });
  const reply = await login(server.url, password ?? readFileSync(join(store.data!, 'admin-password'), 'utf8').trim());
  assert.equal(reply.status, 200, reply.text);
  return { server, cookie: cookiePair(reply.headers['set-cookie']) };
}

for (const kind of ['journal', 'PostgreSQL'] as const) {
  test(
    `admin password, ${kind}: a start with another USERS_ADMIN_PASSWORD ends the admin's sessions (GET / 401, POST /tokens 401); a start with the same one keeps them`,
    { skip: kind === 'PostgreSQL' ? skipPostgres : undefined },
    async (t) => {
      const place = kind === 'journal' ? { data: tempDir(t) } : { data: tempDir(t), store: await testDatabase(t) };
      const first = await adminServer(t, place, 'the first admin password');
      await first.server.running.stop();
      const same = await startTestServer(t, place, { env: { USERS_ADMIN_PASSWORD: 'the first admin password' } });
      assert.equal(await rootStatus(same.url, first.cookie), 200, 'the same password keeps its sessions');
      await same.running.stop();
      const changed = await startTestServer(t, place, { env: { USERS_ADMIN_PASSWORD: 'another admin password' } });
      assert.equal(await rootStatus(changed.url, first.cookie), 401, "the old password's session ended");
      const token = await send(changed.url, 'POST', '/tokens', {
        json: { name: 'late' },
        headers: { cookie: first.cookie },
      });
      assert.equal(token.status, 401, token.text);
      assert.equal((await login(changed.url, 'the first admin password')).status, 401);
      assert.equal((await login(changed.url, 'another admin password')).status, 200);
    },
  );
}

test('admin password, journal: a generated admin-password replaced between starts ends the sessions of the one before', async (t) => {
  const data = tempDir(t);
  const first = await adminServer(t, { data }, undefined);
  await first.server.running.stop();
  writeFileSync(join(data, 'admin-password'), 'a password the operator wrote there\n', { mode: 0o600 });
  const next = await startTestServer(t, { data }, { env: { USERS_ADMIN_PASSWORD: undefined } });
  assert.equal(await rootStatus(next.url, first.cookie), 401);
  assert.equal((await login(next.url, 'a password the operator wrote there')).status, 200);
});
