/**
 * Accounts other than admin (API.md "Sessions", last bullet, and "Access
 * control and limits"): `users-server accounts add|remove|list` (in
 * process through server/main.ts, and through the real
 * `node bin/users-server.js` where a test says "(bin)"), the <data>/accounts
 * file, the reader role on a running server, and the scrypt work of a login.
 */
import { lockOwnerPid } from '../server/ops/data-dir.js';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statfsSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import {
  ACCOUNT_NAME,
  newAccountId,
  parseAccounts,
  readAccountsFile,
  serializeAccounts,
  writeAccountsFile,
  type AccountRecord,
} from '../server/security/accounts-file.js';
import {
  Accounts,
  DEFAULT_SCRYPT_PARAMS,
  hashPassword,
  type ScryptFunction,
  type ScryptParams,
} from '../server/security/credentials.js';
import { parseConfig, usage, type RequireSession } from '../server/ops/config.js';
import { startServer } from '../server/commands/serve.js';
import { signSession } from '../server/security/session-token.js';
import { buildIfStale, onSmallDisk, runUsersServer } from './helpers.js';
import { cleanEnv, runTool, SERVER_BIN, spawnChild, spawnUsersServer } from './processes.js';
import {
  ADMIN_PASSWORD,
  assertProblem,
  basic,
  cookiePair,
  send,
  startTestServer,
  tempDir,
  type Reply,
} from './helpers.js';

const TEST_OPTIONS = {};
const READER_PASSWORD = 'reader pass: with spaces';

// ---------------------------------------------------------------- helpers

/** A data directory as a first start leaves it (its secret written): the accounts commands refuse any other. */
function dataDir(t: TestContext): string {
  const dir = tempDir(t);
  writeFileSync(join(dir, 'secret'), 'a-secret-of-a-first-start-0123456789abcdef\n', { mode: 0o600 });
  return dir;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * `users-server accounts ARGS` in this process (helpers.ts); the tests marked "(bin)" run the real executable instead.
 */
function accounts(
  _t: TestContext,
  args: string[],
  options: { stdin?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<Run> {
  return runUsersServer(['accounts', ...shortPasswordsAllowed(args)], options);
}

/**
 * These tests use short passwords where the length is not the point; the
 * tests of --min-password-length give it themselves.
 */
function shortPasswordsAllowed(args: string[]): string[] {
  return (args[0] === 'add' || args[0] === 'passwd') && !args.some((a) => a.startsWith('--min-password-length'))
    ? [...args, '--min-password-length', '1']
    : args;
}

/** The same through `node bin/users-server.js accounts ARGS`. */
async function accountsBin(
  t: TestContext,
  args: string[],
  options: { stdin?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<Run> {
  const child = spawnUsersServer(t, ['accounts', ...shortPasswordsAllowed(args)], {
    stdin: 'pipe',
    ...(options.env && { env: options.env }),
  });
  // The command may exit before reading all of it.
  child.process.stdin!.on('error', () => {});
  child.process.stdin!.end(options.stdin ?? '');
  const { code } = await child.exited;
  return { code, stdout: child.stdout(), stderr: child.stderr() };
}

/** `accounts add NAME --data DIR` with the password on stdin; asserts success. */
async function addAccount(
  t: TestContext,
  dir: string,
  name: string,
  role: 'admin' | 'reader',
  password: string,
): Promise<void> {
  const run = await accounts(t, ['add', name, '--role', role, '--data', dir], { stdin: password + '\n' });
  assert.equal(run.code, 0, `accounts add ${name}: ${run.stderr}`);
}

async function removeAccount(t: TestContext, dir: string, name: string): Promise<void> {
  const run = await accounts(t, ['remove', name, '--data', dir]);
  assert.equal(run.code, 0, `accounts remove ${name}: ${run.stderr}`);
}

function assertOneErrorLine(run: Run, code: number): string {
  assert.equal(run.code, code, `exit code ${run.code}; stderr=${JSON.stringify(run.stderr)}`);
  assert.equal(run.stdout, '', 'nothing on stdout');
  const lines = run.stderr.split('\n').filter((l) => l !== '');
  assert.equal(lines.length, 1, `expected one stderr line: ${JSON.stringify(run.stderr)}`);
  assert.match(lines[0]!, /^users-server accounts: \S/);
  assert.ok(!/^\s+at /m.test(run.stderr), `stack trace on stderr: ${run.stderr}`);
  return lines[0]!;
}

async function login(url: string, user: string, password: string): Promise<Reply> {
  return send(url, 'POST', '/login', { headers: { authorization: basic(user, password) } });
}

async function loginCookie(url: string, user: string, password: string): Promise<string> {
  const reply = await login(url, user, password);
  assert.equal(reply.status, 200, `login as ${user}: ${reply.text}`);
  return cookiePair(reply.headers['set-cookie']);
}

async function rootStatus(url: string, cookie: string): Promise<number> {
  return (await send(url, 'GET', '/', { headers: { cookie } })).status;
}

function fileMode(path: string): number {
  return statSync(path).mode & 0o777;
}

/** A fast stand-in for scrypt that records the parameters of every call. */
function countingScrypt(): { calls: ScryptParams[]; scrypt: ScryptFunction } {
  const calls: ScryptParams[] = [];
  const scrypt: ScryptFunction = async (password, salt, params, length) => {
    calls.push(params);
    return createHash('sha256').update(salt).update(password).digest().subarray(0, length);
  };
  return { calls, scrypt };
}

// ---------------------------------------------------------------- the command

test(
  'accounts add (bin): writes <data>/accounts with mode 0600, exits 0, and stores a salted scrypt hash with the default N, r, p, never the password',
  TEST_OPTIONS,
  async (t) => {
    const dir = dataDir(t);
    const run = await accountsBin(t, ['add', 'bob', '--data', dir], {
      stdin: 'secret-of-bob\n',
      env: { USERS_PASSWORD_COST: undefined },
    });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stderr, '');
    assert.match(run.stdout, /bob/);
    const path = join(dir, 'accounts');
    assert.equal(fileMode(path), 0o600);
    const text = readFileSync(path, 'utf8');
    assert.ok(!text.includes('secret-of-bob'), 'the password is in the file');
    const [entry] = JSON.parse(text).accounts;
    assert.equal(entry.name, 'bob');
    assert.equal(entry.role, 'reader', '--role defaults to reader');
    assert.match(entry.id, /^[A-Za-z0-9_-]{8,}$/);
    assert.deepEqual({ N: entry.scrypt.N, r: entry.scrypt.r, p: entry.scrypt.p }, { ...DEFAULT_SCRYPT_PARAMS });
    assert.ok(Buffer.from(entry.scrypt.salt, 'base64').length >= 16, 'a salt of 16 bytes or more');
    const stored = new Accounts();
    stored.replaceStored(readAccountsFile(dir));
    assert.equal((await stored.verify('bob', 'secret-of-bob'))?.name, 'bob', 'the stored hash verifies the password');
    assert.equal(await stored.verify('bob', 'secret-of-bob '), undefined);
    assert.deepEqual(readdirSync(dir).sort(), ['accounts', 'secret'], 'no temp file is left behind');
  },
);

test(
  'accounts add: each account gets its own salt, so the same password gives different hashes',
  TEST_OPTIONS,
  async (t) => {
    const dir = dataDir(t);
    await addAccount(t, dir, 'one', 'reader', 'same');
    await addAccount(t, dir, 'two', 'reader', 'same');
    const [one, two] = readAccountsFile(dir);
    assert.notDeepEqual(one!.password.salt, two!.password.salt);
    assert.notDeepEqual(one!.password.hash, two!.password.hash);
    assert.notEqual(one!.id, two!.id);
  },
);

const stdinCases = [
  {
    name: 'the first line of a piped stdin, without its LF, and nothing after it',
    stdin: 'first line\nsecond line\n',
    args: [] as string[],
    want: 'first line',
  },
  {
    name: 'a CRLF line ending is not part of the password',
    stdin: 'crlf-password\r\n',
    args: [],
    want: 'crlf-password',
  },
  { name: 'a last line without a newline is the whole password', stdin: 'no newline', args: [], want: 'no newline' },
  { name: 'spaces are kept', stdin: '  spaced  \n', args: [], want: '  spaced  ' },
  {
    name: '--password-stdin reads the first line too',
    stdin: 'from-flag\nignored\n',
    args: ['--password-stdin'],
    want: 'from-flag',
  },
  { name: 'UTF-8 passwords are read as UTF-8', stdin: 'pässwörd-名前\n', args: [], want: 'pässwörd-名前' },
];

for (const c of stdinCases) {
  test(`accounts add: the password is ${c.name}`, TEST_OPTIONS, async (t) => {
    const dir = dataDir(t);
    const run = await accounts(t, ['add', 'carol', ...c.args, '--data', dir], { stdin: c.stdin });
    assert.equal(run.code, 0, run.stderr);
    const stored = new Accounts();
    stored.replaceStored(readAccountsFile(dir));
    assert.equal(
      (await stored.verify('carol', c.want))?.name,
      'carol',
      `the password is not ${JSON.stringify(c.want)}`,
    );
  });
}

test(
  'accounts list: prints a header, the built-in admin, then each account with its role, in the order added',
  TEST_OPTIONS,
  async (t) => {
    const dir = dataDir(t);
    await addAccount(t, dir, 'reader.one', 'reader', 'pw');
    await addAccount(t, dir, 'boss_2', 'admin', 'pw');
    const run = await accounts(t, ['list', '--data', dir]);
    assert.equal(run.code, 0, run.stderr);
    const rows = run.stdout
      .trimEnd()
      .split('\n')
      .map((l) => l.split(/\s+/));
    assert.deepEqual(
      rows.map((r) => r.slice(0, 2)),
      [
        ['NAME', 'ROLE'],
        ['admin', 'admin'],
        ['reader.one', 'reader'],
        ['boss_2', 'admin'],
      ],
    );
    assert.equal(rows[1]![2], 'built-in');
    for (const row of rows.slice(2))
      assert.ok(!Number.isNaN(Date.parse(row[2]!)), `created time of ${row[0]}: ${row[2]}`);
  },
);

test(
  'accounts list --json: an array of {name, role, created}, the built-in admin first with builtIn: true',
  TEST_OPTIONS,
  async (t) => {
    const dir = dataDir(t);
    await addAccount(t, dir, 'bob', 'reader', 'pw');
    const run = await accounts(t, ['list', '--json', '--data', dir]);
    assert.equal(run.code, 0, run.stderr);
    const items = JSON.parse(run.stdout) as Array<Record<string, unknown>>;
    assert.deepEqual(items[0], { name: 'admin', role: 'admin', builtIn: true });
    assert.equal(items.length, 2);
    assert.deepEqual(Object.keys(items[1]!), ['name', 'role', 'created']);
    assert.equal(items[1]!.name, 'bob');
    assert.equal(items[1]!.role, 'reader');
    assert.equal(items[1]!.created, readAccountsFile(dir)[0]!.created);
  },
);

test(
  'accounts on a data directory that does not exist, or that no server made (a typo in --data), exits 1 and creates nothing',
  TEST_OPTIONS,
  async (t) => {
    const missing = join(dataDir(t), 'missing');
    for (const args of [['list'], ['add', 'bob'], ['remove', 'bob'], ['passwd', 'bob'], ['role', 'bob', 'admin']]) {
      const run = await accounts(t, [...args, '--data', missing], { stdin: 'a long enough password\n' });
      assert.match(
        assertOneErrorLine(run, 1),
        /missing does not exist: give the server's data directory with --data, or start users-server once with --data .* to make it$/,
      );
      assert.equal(existsSync(missing), false, `${args[0]} created nothing`);
    }
    const stranger = tempDir(t);
    writeFileSync(join(stranger, 'notes.txt'), 'not a data directory');
    const refused = await accounts(t, ['add', 'bob', '--data', stranger], { stdin: 'a long enough password\n' });
    assert.match(
      assertOneErrorLine(refused, 1),
      /is not a users-server data directory \(no journal, secret or accounts in it\)/,
    );
    assert.deepEqual(readdirSync(stranger), ['notes.txt']);
  },
);

test('accounts remove: exits 0 and keeps the other accounts, with their ids', TEST_OPTIONS, async (t) => {
  const dir = dataDir(t);
  await addAccount(t, dir, 'bob', 'reader', 'pw');
  await addAccount(t, dir, 'carol', 'admin', 'pw');
  const carol = readAccountsFile(dir)[1]!;
  await removeAccount(t, dir, 'bob');
  assert.deepEqual(readAccountsFile(dir), [carol]);
  assert.equal(fileMode(join(dir, 'accounts')), 0o600);
});

test('accounts: --data defaults to USERS_DATA, and --data beats USERS_DATA', TEST_OPTIONS, async (t) => {
  const fromEnv = dataDir(t);
  const fromFlag = dataDir(t);
  assert.equal((await accounts(t, ['add', 'envy'], { stdin: 'pw\n', env: { USERS_DATA: fromEnv } })).code, 0);
  assert.equal(
    (await accounts(t, ['add', 'flaggy', '--data', fromFlag], { stdin: 'pw\n', env: { USERS_DATA: fromEnv } })).code,
    0,
  );
  assert.deepEqual(
    readAccountsFile(fromEnv).map((a) => a.name),
    ['envy'],
  );
  assert.deepEqual(
    readAccountsFile(fromFlag).map((a) => a.name),
    ['flaggy'],
  );
});

interface RefusalCase {
  name: string;
  args: string[];
  stdin?: string;
  code: 1 | 2;
}

// Each runs against a data directory already holding the reader "bob".
const refusals: RefusalCase[] = [
  { name: 'add of a name that exists', args: ['add', 'bob'], stdin: 'pw\n', code: 1 },
  { name: 'add of the built-in "admin"', args: ['add', 'admin', '--role', 'admin'], stdin: 'pw\n', code: 1 },
  { name: 'remove of the built-in "admin"', args: ['remove', 'admin'], code: 1 },
  { name: 'remove of a name that does not exist', args: ['remove', 'nobody'], code: 1 },
  { name: 'add with an empty password (empty first line)', args: ['add', 'carol'], stdin: '\nsecond\n', code: 2 },
  { name: 'add with nothing on stdin', args: ['add', 'carol'], stdin: '', code: 2 },
  { name: 'add with a password over 1024 characters', args: ['add', 'carol'], stdin: 'x'.repeat(1025) + '\n', code: 2 },
  { name: 'add with a name holding a space', args: ['add', 'bad name'], stdin: 'pw\n', code: 2 },
  { name: 'add with a name holding a colon', args: ['add', 'a:b'], stdin: 'pw\n', code: 2 },
  { name: 'add with a 65-character name', args: ['add', 'a'.repeat(65)], stdin: 'pw\n', code: 2 },
  { name: 'add with --role superuser', args: ['add', 'carol', '--role', 'superuser'], stdin: 'pw\n', code: 2 },
  { name: 'add without a NAME', args: ['add'], stdin: 'pw\n', code: 2 },
  { name: 'add with two NAMEs', args: ['add', 'carol', 'dave'], stdin: 'pw\n', code: 2 },
  { name: 'remove without a NAME', args: ['remove'], code: 2 },
  { name: 'list with a NAME', args: ['list', 'bob'], code: 2 },
  { name: 'an unknown flag', args: ['list', '--verbose'], code: 2 },
  { name: '--json on add', args: ['add', 'carol', '--json'], stdin: 'pw\n', code: 2 },
  { name: 'no command', args: [], code: 2 },
  { name: 'an unknown command', args: ['rename', 'bob'], code: 2 },
];

for (const c of refusals) {
  test(
    `accounts: ${c.name} exits ${c.code} with one stderr line "users-server accounts: ..." and leaves the accounts file unchanged`,
    TEST_OPTIONS,
    async (t) => {
      const dir = dataDir(t);
      await addAccount(t, dir, 'bob', 'reader', 'pw');
      const before = readFileSync(join(dir, 'accounts'), 'utf8');
      const run = await accounts(t, [...c.args, '--data', dir], c.stdin === undefined ? {} : { stdin: c.stdin });
      assertOneErrorLine(run, c.code);
      assert.equal(readFileSync(join(dir, 'accounts'), 'utf8'), before);
      assert.deepEqual(readdirSync(dir).sort(), ['accounts', 'secret'], 'no temp file is left behind');
    },
  );
}

const USAGE_LINES = [
  'accounts add NAME [--role admin|reader] [PASSWORD] [PLACE]',
  'accounts passwd NAME [PASSWORD] [PLACE]',
  'accounts role NAME admin|reader [PLACE]',
  'accounts remove NAME [PLACE]',
  'accounts list [--json] [PLACE]',
  'PASSWORD: [--password-stdin] [--min-password-length N]',
  'PLACE:    --data DIR | --store URL',
];

test('accounts --help and accounts add --help print the usage lines and exit 0', TEST_OPTIONS, async (t) => {
  for (const args of [['--help'], ['add', '--help']]) {
    const run = await accounts(t, args);
    assert.equal(run.code, 0, run.stderr);
    for (const line of USAGE_LINES) {
      assert.ok(run.stdout.includes(line), `${args.join(' ')} lacks ${line}`);
    }
  }
});

test('users-server --help names the accounts commands and where their help is', () => {
  const text = usage();
  assert.ok(text.includes('users-server accounts add|passwd|role|remove|list NAME ...'), text);
  assert.match(text, /^ {2}accounts {2}the accounts that may log in/m);
});

const nameCases = [
  { name: 'a', valid: true },
  { name: 'A.b_c-9', valid: true },
  { name: 'x'.repeat(64), valid: true },
  { name: '', valid: false },
  { name: 'x'.repeat(65), valid: false },
  { name: 'a:b', valid: false },
  { name: 'a b', valid: false },
  { name: 'é', valid: false },
  { name: 'a/b', valid: false },
];

for (const c of nameCases) {
  test(`Account names are 1..64 of A-Z a-z 0-9 . _ -: ${JSON.stringify(c.name.length > 20 ? `${c.name.length} x's` : c.name)} is ${c.valid ? 'valid' : 'refused'}`, () => {
    assert.equal(ACCOUNT_NAME.test(c.name), c.valid);
  });
}

// A terminal needs a pty: python3's pty module drives the real command.
const PTY_SCRIPT = `
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
out = b''
# Reads until the marker shows, or the command has exited (EOF or EIO): no time limit.
def read_until(marker):
    global out
    while marker not in out:
        try:
            chunk = os.read(fd, 1024)
        except OSError:
            return
        if not chunk:
            return
        out += chunk
read_until(b'Password for')
os.write(fd, sys.stdin.readline().rstrip('\\n').encode() + b'\\r')
read_until(b'Again')
os.write(fd, sys.stdin.readline().rstrip('\\n').encode() + b'\\r')
read_until(b'\\x00')
_, status = os.waitpid(pid, 0)
sys.stdout.write(repr(out) + '\\n' + str(os.waitstatus_to_exitcode(status)) + '\\n')
`;

/**
 * Runs `accounts add tty` on a pty; not synchronously: the event loop goes on (a pool of this process may be
 * connecting).
 */
async function runOnTerminal(
  t: TestContext,
  dir: string,
  first: string,
  second: string,
): Promise<{ transcript: string; code: number } | undefined> {
  const stale = buildIfStale();
  if (stale !== undefined) throw new Error(stale);
  const python = await runTool(t, 'python3', ['-c', 'import pty']).catch(() => undefined);
  if (python?.code !== 0) {
    t.skip('python3 with the pty module is not available');
    return undefined;
  }
  const run = await runTool(
    t,
    'python3',
    ['-c', PTY_SCRIPT, process.execPath, SERVER_BIN, 'accounts', 'add', 'tty', '--data', dir],
    { input: `${first}\n${second}\n`, env: { ...cleanEnv(), USERS_PASSWORD_COST: '1' } },
  );
  const [transcript, code] = run.stdout.trimEnd().split('\n');
  return { transcript: transcript ?? '', code: Number(code) };
}

test('accounts add on a terminal asks for the password twice without echoing it', TEST_OPTIONS, async (t) => {
  const dir = dataDir(t);
  const result = await runOnTerminal(t, dir, 'typed-on-a-tty', 'typed-on-a-tty');
  if (result === undefined) return;
  assert.equal(result.code, 0, result.transcript);
  assert.match(result.transcript, /Password for "tty": /);
  assert.match(result.transcript, /Again: /);
  assert.ok(!result.transcript.includes('typed-on-a-tty'), `the password was echoed: ${result.transcript}`);
  const stored = new Accounts();
  stored.replaceStored(readAccountsFile(dir));
  assert.equal((await stored.verify('tty', 'typed-on-a-tty'))?.name, 'tty');
});

test('accounts add on a terminal with two different passwords exits 1 and adds nothing', TEST_OPTIONS, async (t) => {
  const dir = dataDir(t);
  const result = await runOnTerminal(t, dir, 'first-try', 'second-try');
  if (result === undefined) return;
  assert.equal(result.code, 1, result.transcript);
  assert.match(result.transcript, /users-server accounts: the two passwords differ/);
  assert.equal(existsSync(join(dir, 'accounts')), false);
});

// ---------------------------------------------------------------- the file

function record(name: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name,
    role: 'reader',
    id: 'abcdefghijkl',
    created: '2026-01-01T00:00:00.000Z',
    scrypt: {
      N: 16384,
      r: 8,
      p: 1,
      salt: Buffer.alloc(16, 1).toString('base64'),
      hash: Buffer.alloc(32, 2).toString('base64'),
    },
    ...overrides,
  };
}

const fileCases = [
  { name: 'not JSON', text: '{"format":1,' },
  { name: 'another format', text: JSON.stringify({ format: 2, accounts: [] }) },
  { name: 'accounts not an array', text: JSON.stringify({ format: 1, accounts: {} }) },
  { name: 'the built-in "admin" in it', text: JSON.stringify({ format: 1, accounts: [record('admin')] }) },
  {
    name: 'a name twice',
    text: JSON.stringify({ format: 1, accounts: [record('bob'), record('bob', { id: 'mnopqrstuvwx' })] }),
  },
  { name: 'a bad name', text: JSON.stringify({ format: 1, accounts: [record('a b')] }) },
  { name: 'a bad role', text: JSON.stringify({ format: 1, accounts: [record('bob', { role: 'root' })] }) },
  { name: 'no id', text: JSON.stringify({ format: 1, accounts: [record('bob', { id: undefined })] }) },
  {
    name: 'an N that is not a power of two',
    text: JSON.stringify({
      format: 1,
      accounts: [record('bob', { scrypt: { ...(record('bob').scrypt as object), N: 1000 } })],
    }),
  },
  {
    name: 'an N over 2^20',
    text: JSON.stringify({
      format: 1,
      accounts: [record('bob', { scrypt: { ...(record('bob').scrypt as object), N: 2 ** 21 } })],
    }),
  },
  {
    name: 'a salt that is not base64',
    text: JSON.stringify({
      format: 1,
      accounts: [record('bob', { scrypt: { ...(record('bob').scrypt as object), salt: '%%%%' } })],
    }),
  },
];

for (const c of fileCases) {
  test(`The accounts file: one with ${c.name} is refused with a message`, () => {
    assert.throws(() => parseAccounts(c.text), { name: 'DataError' });
  });
}

test('The accounts file: what it serializes parses back to the same accounts, with the scrypt parameters of each', async () => {
  const records: AccountRecord[] = [
    {
      name: 'bob',
      role: 'reader',
      id: 'abcdefghijkl',
      created: '2026-01-01T00:00:00.000Z',
      password: await hashPassword('pw', { params: { N: 1024, r: 8, p: 1 } }),
    },
    {
      name: 'carol',
      role: 'admin',
      id: 'mnopqrstuvwx',
      created: '2026-01-02T00:00:00.000Z',
      password: await hashPassword('pw', { params: { N: 2048, r: 4, p: 2 } }),
    },
  ];
  assert.deepEqual(parseAccounts(serializeAccounts(records)), records);
  assert.deepEqual(parseAccounts(serializeAccounts([])), []);
});

test('The accounts file: an account stored with other scrypt parameters still logs in (they are read per account)', async () => {
  const store = new Accounts();
  const password = await hashPassword('pw', { params: { N: 1024, r: 4, p: 1 } });
  store.replaceStored([{ name: 'old', role: 'reader', id: 'abcdefghijkl', password }]);
  assert.equal((await store.verify('old', 'pw'))?.name, 'old');
  assert.equal(await store.verify('old', 'pw2'), undefined);
});

test('The accounts file: a server refuses to start on a damaged one, with a DataError naming the file', async (t) => {
  const dir = dataDir(t);
  writeFileSync(join(dir, 'accounts'), '{"format":1,"accounts":[', { mode: 0o600 });
  const { config } = parseConfig([], {});
  await assert.rejects(
    startServer(
      { ...config, host: '127.0.0.1', port: 0, data: dir, store: 'memory' },
      { env: { USERS_ADMIN_PASSWORD: ADMIN_PASSWORD }, logError: () => {} },
    ),
    (error: Error) => error.name === 'DataError' && error.message.includes(join(dir, 'accounts')),
  );
  assert.equal(lockOwnerPid(dir), undefined, 'the lock is released');
});

// ---------------------------------------------------------------- timing

test('Sessions: a login for an unknown name runs scrypt exactly once, with the parameters and key length of a new account', async () => {
  const { calls, scrypt } = countingScrypt();
  const store = new Accounts({ scrypt });
  store.add('admin', 'admin', await hashPassword(ADMIN_PASSWORD, { scrypt }));
  calls.length = 0;
  assert.equal(await store.verify('nobody', 'guess'), undefined);
  assert.equal(calls.length, 1);
  assert.deepEqual(calls[0], DEFAULT_SCRYPT_PARAMS);
  assert.deepEqual(
    (await hashPassword('x')).params,
    DEFAULT_SCRYPT_PARAMS,
    'a new account is hashed with the same parameters',
  );
});

test('Sessions: a login for a known name runs scrypt exactly once, right password or wrong', async () => {
  const { calls, scrypt } = countingScrypt();
  const store = new Accounts({ scrypt });
  store.replaceStored([
    { name: 'bob', role: 'reader', id: 'abcdefghijkl', password: await hashPassword('pw', { scrypt }) },
  ]);
  calls.length = 0;
  assert.equal((await store.verify('bob', 'pw'))?.name, 'bob');
  assert.equal(calls.length, 1);
  assert.equal(await store.verify('bob', 'wrong'), undefined);
  assert.equal(calls.length, 2);
  assert.deepEqual(calls, [DEFAULT_SCRYPT_PARAMS, DEFAULT_SCRYPT_PARAMS]);
});

test('Sessions: on a running server, a login for an unknown name runs scrypt with the cost of the stored accounts, not --password-cost, when the two differ', async (t) => {
  const { calls, scrypt } = countingScrypt();
  // The accounts are hashed at cost 1 (the harness's), admin at --password-cost 3.
  const server = await startTestServer(
    t,
    { passwordCost: 3 },
    {
      scrypt,
      accounts: [
        { name: 'rita', role: 'reader', password: READER_PASSWORD },
        { name: 'bob', role: 'reader', password: 'bob-password' },
      ],
    },
  );
  calls.length = 0;
  assertProblem(
    await send(server.url, 'POST', '/login', { headers: { authorization: basic('bob', 'wrong') } }),
    401,
    'login-failed',
  );
  assertProblem(
    await send(server.url, 'POST', '/login', { headers: { authorization: basic('nobody', 'wrong') } }),
    401,
    'login-failed',
  );
  assert.equal(calls.length, 2);
  assert.deepEqual(calls[0], { N: 2, r: 8, p: 1 }, 'bob is stored at cost 1');
  assert.deepEqual(calls[1], calls[0], 'the unknown name costs what bob costs');
});

test('Sessions: the decoy takes the parameters most accounts have (the higher cost on a tie), the built-in admin aside, and follows a change of the stored accounts', async () => {
  const { calls, scrypt } = countingScrypt();
  const store = new Accounts({ scrypt, cost: 16 });
  const at = async (name: string, N: number) => ({
    name,
    role: 'reader' as const,
    id: 'abcdefghijkl',
    password: await hashPassword('pw', { scrypt, params: { N, r: 8, p: 1 } }),
  });
  store.add('admin', 'admin', await hashPassword(ADMIN_PASSWORD, { scrypt, params: { N: 2 ** 16, r: 8, p: 1 } }));
  const guess = async () => {
    calls.length = 0;
    await store.verify('nobody', 'guess');
    return calls[0]?.N;
  };
  assert.equal(await guess(), 2 ** 16, 'no stored account: --password-cost');
  store.replaceStored([await at('bob', 2 ** 15), await at('carol', 2 ** 15), await at('dave', 2 ** 14)]);
  assert.equal(await guess(), 2 ** 15, 'the most common');
  store.replaceStored([await at('bob', 2 ** 15), await at('dave', 2 ** 14)]);
  assert.equal(await guess(), 2 ** 15, 'a tie: the higher cost');
  store.replaceStored([await at('dave', 2 ** 14)]);
  assert.equal(await guess(), 2 ** 14);
});

// ---------------------------------------------------------------- a running server

interface Write {
  name: string;
  method: string;
  path: string;
  json?: unknown;
}

const writes: Write[] = [
  { name: 'PUT creating through an alias', method: 'PUT', path: '/users/alice', json: { name: 'Alice' } },
  { name: 'PUT replacing a user', method: 'PUT', path: '/users/1', json: { name: 'Changed' } },
  { name: 'DELETE', method: 'DELETE', path: '/users/1' },
  { name: 'POST /users/new', method: 'POST', path: '/users/new', json: { name: 'New' } },
  { name: 'POST /reservations', method: 'POST', path: '/reservations' },
];

const reads = [
  { method: 'GET', path: '/' },
  { method: 'GET', path: '/users' },
  { method: 'GET', path: '/users/1' },
  { method: 'GET', path: '/users/seed' },
  { method: 'HEAD', path: '/users/1' },
];

function sendWrite(url: string, w: Write, cookie: string): Promise<Reply> {
  return send(
    url,
    w.method,
    w.path,
    w.json === undefined ? { headers: { cookie } } : { headers: { cookie }, json: w.json },
  );
}

/** A server in `mode` holding /users/seed (id 1), a reader added by the command while it runs, and both cookies. */
async function serverWithReader(t: TestContext, mode: RequireSession) {
  // The data directory's accounts file, whatever USERS_TEST_STORE says (a
  // PostgreSQL server keeps its accounts in the database: postgres-instances.test.ts).
  const server = await startTestServer(t, { requireSession: mode, store: 'memory' });
  const admin = await server.login();
  assert.equal(
    (await send(server.url, 'PUT', '/users/seed', { json: { name: 'Seed' }, headers: { cookie: admin } })).status,
    201,
  );
  await addAccount(t, server.dataDir, 'rita', 'reader', READER_PASSWORD);
  // A login looks at the file first: no wait for the poll.
  const reader = await loginCookie(server.url, 'rita', READER_PASSWORD);
  return { server, admin, reader };
}

for (const mode of ['writes', 'all'] as const) {
  test(
    `Sessions, require-session ${mode}: a reader added while the server runs logs in at once, gets 403 forbidden on every write and 200 on every read, and the writes change nothing`,
    TEST_OPTIONS,
    async (t) => {
      const { server, admin, reader } = await serverWithReader(t, mode);
      const before = (await send(server.url, 'GET', '/users', { headers: { cookie: admin } })).text;
      for (const w of writes) assertProblem(await sendWrite(server.url, w, reader), 403, 'forbidden', w.name);
      for (const r of reads) {
        const reply = await send(server.url, r.method, r.path, { headers: { cookie: reader } });
        assert.equal(reply.status, 200, `${r.method} ${r.path}: ${reply.text}`);
      }
      const after = await send(server.url, 'GET', '/users', { headers: { cookie: admin } });
      assert.equal(after.text, before, 'the users are unchanged');
      const reserved = await send(server.url, 'POST', '/reservations', { headers: { cookie: admin } });
      assert.equal(reserved.json().id, 2, 'no id was issued by the refused writes');
    },
  );
}

test(
  "Sessions, require-session none: a reader's cookie is held to its role, so its write is 403 and changes nothing; the same write without a cookie is let through",
  TEST_OPTIONS,
  async (t) => {
    const { server, reader } = await serverWithReader(t, 'none');
    assertProblem(
      await send(server.url, 'PUT', '/users/alice', { json: { name: 'Alice' }, headers: { cookie: reader } }),
      403,
      'forbidden',
    );
    assert.equal((await send(server.url, 'GET', '/users/alice')).status, 404);
    assert.equal((await send(server.url, 'PUT', '/users/alice', { json: { name: 'Alice' } })).status, 201);
  },
);

test(
  'Sessions: an account with role admin added by the command may write under require-session writes',
  TEST_OPTIONS,
  async (t) => {
    const server = await startTestServer(t, { requireSession: 'writes', store: 'memory' });
    await addAccount(t, server.dataDir, 'boss', 'admin', 'boss-pw');
    const cookie = await loginCookie(server.url, 'boss', 'boss-pw');
    assert.equal(
      (await send(server.url, 'PUT', '/users/alice', { json: { name: 'Alice' }, headers: { cookie } })).status,
      201,
    );
  },
);

test(
  "Sessions: accounts remove on a running server ends the account's sessions (401) without a restart, and its login fails",
  TEST_OPTIONS,
  async (t) => {
    const { server, admin, reader } = await serverWithReader(t, 'all');
    assert.equal(await rootStatus(server.url, reader), 200);
    // No login in between: the server's own poll of the file finds the change.
    const reloaded = server.nextAccountsReload();
    await removeAccount(t, server.dataDir, 'rita');
    await reloaded;
    assert.equal(await rootStatus(server.url, reader), 401);
    const list = await send(server.url, 'GET', '/users', { headers: { cookie: reader } });
    assertProblem(list, 401, 'unauthorized');
    assertProblem(await login(server.url, 'rita', READER_PASSWORD), 401, 'login-failed');
    assert.equal(await rootStatus(server.url, admin), 200, 'other sessions are untouched');
  },
);

test(
  "Sessions: accounts passwd on a running server: the new password logs in, the old one fails, and the account's sessions end without a restart",
  TEST_OPTIONS,
  async (t) => {
    const { server, admin, reader } = await serverWithReader(t, 'all');
    const reloaded = server.nextAccountsReload();
    const run = await accounts(t, ['passwd', 'rita', '--data', server.dataDir], {
      stdin: 'a brand new reader password\n',
    });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, 'changed the password of "rita"; its sessions end\n');
    await reloaded;
    assert.equal(await rootStatus(server.url, reader), 401, 'the old session ended');
    assertProblem(await login(server.url, 'rita', READER_PASSWORD), 401, 'login-failed');
    assert.equal(
      await rootStatus(server.url, await loginCookie(server.url, 'rita', 'a brand new reader password')),
      200,
    );
    assert.equal(await rootStatus(server.url, admin), 200, 'other sessions are untouched');
  },
);

test(
  "Sessions: accounts role on a running server: the account's sessions end, and a new login acts with the new role; the same role again changes nothing",
  TEST_OPTIONS,
  async (t) => {
    const { server, reader } = await serverWithReader(t, 'all');
    assertProblem(
      await send(server.url, 'PUT', '/users/x', { json: { name: 'X' }, headers: { cookie: reader } }),
      403,
      'forbidden',
    );
    const reloaded = server.nextAccountsReload();
    const run = await accounts(t, ['role', 'rita', 'admin', '--data', server.dataDir]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, '"rita" now has role admin; its sessions end\n');
    await reloaded;
    assert.equal(await rootStatus(server.url, reader), 401);
    const promoted = await loginCookie(server.url, 'rita', READER_PASSWORD);
    assert.equal(
      (await send(server.url, 'PUT', '/users/x', { json: { name: 'X' }, headers: { cookie: promoted } })).status,
      201,
    );
    const again = await accounts(t, ['role', 'rita', 'admin', '--data', server.dataDir]);
    assert.equal(again.stdout, '"rita" already has role admin; nothing changed\n');
    assert.equal(await rootStatus(server.url, promoted), 200);
    for (const [args, code, pattern] of [
      [['role', 'admin', 'reader'], 1, /built in and always admin/],
      [['role', 'nobody', 'reader'], 1, /no account "nobody"/],
      [['role', 'rita', 'root'], 2, /the role must be admin or reader/],
      [['passwd', 'nobody'], 1, /no account "nobody"/],
    ] as const) {
      assert.match(
        assertOneErrorLine(
          await accounts(t, [...args, '--data', server.dataDir], { stdin: 'a long enough password\n' }),
          code,
        ),
        pattern,
      );
    }
  },
);

test(
  'accounts add and passwd refuse a password under 12 characters (exit 2, nothing changed); --min-password-length sets the limit',
  TEST_OPTIONS,
  async (t) => {
    const dir = dataDir(t);
    const short = await accounts(t, ['add', 'bob', '--data', dir, '--min-password-length', '12'], {
      stdin: 'elevenchars\n',
    });
    assert.match(
      assertOneErrorLine(short, 2),
      /the password has 11 characters; it needs at least 12 \(--min-password-length\)/,
    );
    assert.equal(existsSync(join(dir, 'accounts')), false);
    const defaults = await runUsersServer(['accounts', 'add', 'bob', '--data', dir], { stdin: 'elevenchars\n' });
    assert.equal(defaults.code, 2, 'the default is 12');
    assert.equal(
      (await runUsersServer(['accounts', 'add', 'bob', '--data', dir], { stdin: 'twelve chars\n' })).code,
      0,
    );
    assert.equal(
      (await accounts(t, ['add', 'carol', '--data', dir, '--min-password-length', '8'], { stdin: 'eight ch\n' })).code,
      0,
    );
    const before = readFileSync(join(dir, 'accounts'), 'utf8');
    assert.equal((await runUsersServer(['accounts', 'passwd', 'bob', '--data', dir], { stdin: 'short\n' })).code, 2);
    assert.equal(readFileSync(join(dir, 'accounts'), 'utf8'), before);
    assertOneErrorLine(
      await accounts(t, ['add', 'dave', '--data', dir, '--min-password-length', '0'], { stdin: 'whatever password\n' }),
      2,
    );
  },
);

test(
  'Sessions: a name removed and added again does not revive its old sessions; a new login works',
  TEST_OPTIONS,
  async (t) => {
    const { server, reader } = await serverWithReader(t, 'all');
    await removeAccount(t, server.dataDir, 'rita');
    await addAccount(t, server.dataDir, 'rita', 'reader', READER_PASSWORD);
    const fresh = await loginCookie(server.url, 'rita', READER_PASSWORD);
    // The login above read the file again, so the server already holds the new account.
    assert.equal(await rootStatus(server.url, fresh), 200);
    assert.equal(await rootStatus(server.url, reader), 401, 'the old cookie is still refused');
    assertProblem(await send(server.url, 'GET', '/users', { headers: { cookie: reader } }), 401, 'unauthorized');
  },
);

test(
  'Sessions: a role changed in the accounts file takes effect on the next request of an open session',
  TEST_OPTIONS,
  async (t) => {
    const { server, reader } = await serverWithReader(t, 'writes');
    assertProblem(await send(server.url, 'POST', '/reservations', { headers: { cookie: reader } }), 403, 'forbidden');
    const records = readAccountsFile(server.dataDir);
    const reloaded = server.nextAccountsReload();
    writeAccountsFile(
      server.dataDir,
      records.map((r) => (r.name === 'rita' ? { ...r, role: 'admin' as const } : r)),
    );
    await reloaded;
    const reply = await send(server.url, 'POST', '/reservations', { headers: { cookie: reader } });
    assert.equal(reply.status, 201, reply.text);
  },
);

test(
  "Sessions: a token naming an account but lacking its account id is not a session, the built-in admin's included",
  TEST_OPTIONS,
  async (t) => {
    const { server } = await serverWithReader(t, 'all');
    const key = Buffer.from(readFileSync(join(server.dataDir, 'secret'), 'utf8').trim(), 'utf8');
    const now = Math.floor(Date.now() / 1000);
    const forged = signSession(
      { account: 'rita', sessionId: 'forged-session-id', issuedAt: now, expiresAt: now + 600 },
      key,
    );
    assert.equal(await rootStatus(server.url, `USER_TOKEN=${forged}`), 401);
    const wrongId = signSession(
      {
        account: 'rita',
        accountId: 'not-her-id-x',
        sessionId: 'forged-session-id',
        issuedAt: now,
        expiresAt: now + 600,
      },
      key,
    );
    assert.equal(await rootStatus(server.url, `USER_TOKEN=${wrongId}`), 401);
    const id = readAccountsFile(server.dataDir)[0]!.id;
    const right = signSession(
      { account: 'rita', accountId: id, sessionId: 'forged-session-id', issuedAt: now, expiresAt: now + 600 },
      key,
    );
    assert.equal(
      await rootStatus(server.url, `USER_TOKEN=${right}`),
      200,
      'the same token with her id passes (the check is the id)',
    );
    const admin = signSession(
      { account: 'admin', sessionId: 'admin-session-id', issuedAt: now, expiresAt: now + 600 },
      key,
    );
    assert.equal(await rootStatus(server.url, `USER_TOKEN=${admin}`), 401, "the admin's id changes with its password");
    const withId = signSession(
      {
        account: 'admin',
        accountId: await server.adminAccountId(),
        sessionId: 'admin-session-id',
        issuedAt: now,
        expiresAt: now + 600,
      },
      key,
    );
    assert.equal(await rootStatus(server.url, `USER_TOKEN=${withId}`), 200);
  },
);

test(
  "Sessions: a damaged accounts file on a running server ends the file accounts' sessions (fail closed) while admin still logs in; a good file brings them back",
  TEST_OPTIONS,
  async (t) => {
    const { server, reader } = await serverWithReader(t, 'all');
    const path = join(server.dataDir, 'accounts');
    const good = readFileSync(path);
    const broke = server.nextAccountsReload();
    writeFileSync(path + '.bad', '{"format":1,"accounts":[', { mode: 0o600 });
    renameSync(path + '.bad', path);
    await broke;
    assert.equal(await rootStatus(server.url, reader), 401, 'the reader session fails once the file broke');
    assert.equal((await login(server.url, 'admin', ADMIN_PASSWORD)).status, 200);
    const fixed = server.nextAccountsReload();
    writeFileSync(path + '.good', good, { mode: 0o600 });
    renameSync(path + '.good', path);
    await fixed;
    assert.equal(await rootStatus(server.url, reader), 200, 'the reader session passes again once the file is fixed');
  },
);

test(
  'accounts add on a disk too full for the new accounts file (a 128 KiB tmpfs) fails in one sentence with exit 1, and every account stays as it was: a write that took part of the file is not taken for the file',
  TEST_OPTIONS,
  async (t) => {
    await onSmallDisk(t, '128k', async (disk) => {
      const dir = join(disk, 'data');
      mkdirSync(dir);
      await startTestServer(t, { data: dir, secrets: ['a test secret of at least thirty-two bytes'] });
      for (let i = 0; i < 40; i++) {
        const added = await runUsersServer(['accounts', 'add', `reader${i}`, '--data', dir, '--password-stdin'], {
          stdin: 'a-password-long-enough\n',
        });
        assert.equal(added.code, 0, added.stderr);
      }
      const before = readFileSync(join(dir, 'accounts'));
      assert.ok(before.length > 8192, `${before.length} bytes: more than the room left below`);
      const { bavail, bsize } = statfsSync(disk);
      writeFileSync(join(disk, 'filler'), Buffer.alloc(bavail * bsize - 4096));
      const refused = await runUsersServer(['accounts', 'add', 'one-more', '--data', dir, '--password-stdin'], {
        stdin: 'a-password-long-enough\n',
      });
      assert.deepEqual(
        [refused.code, refused.stdout, refused.stderr],
        [1, '', 'users-server accounts: no space left to write the accounts file; free some space\n'],
      );
      assert.deepEqual(readFileSync(join(dir, 'accounts')), before);
      assert.deepEqual(
        readdirSync(dir).filter((name) => name.endsWith('.tmp')),
        [],
      );
    });
  },
);

test(
  'accounts add (bin) run by twelve processes at once on one data directory: every account is kept (the edits take turns), and an edit lock left by a killed process is taken over',
  TEST_OPTIONS,
  async (t) => {
    buildIfStale();
    const dir = tempDir(t);
    await startTestServer(t, { data: dir });
    const add = (name: string) =>
      runTool(t, process.execPath, [SERVER_BIN, 'accounts', 'add', name, '--data', dir, '--password-stdin'], {
        input: 'a-password-long-enough\n',
        env: { ...cleanEnv(), USERS_PASSWORD_COST: '1' },
      });
    // A file of some size, so that each edit's read and write take a while, as they do for a real team.
    assert.equal((await add('first')).code, 0);
    const first = readAccountsFile(dir)[0]!;
    writeAccountsFile(
      dir,
      Array.from({ length: 3000 }, (_, i) => ({ ...first, name: `existing${i}`, id: newAccountId() })),
    );
    const names = Array.from({ length: 12 }, (_, i) => `parallel${i}`);
    const runs = await Promise.all(names.map(add));
    for (const run of runs) assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(
      readAccountsFile(dir)
        .map((a) => a.name)
        .filter((name) => name.startsWith('parallel'))
        .sort(),
      [...names].sort(),
    );
    assert.equal(readAccountsFile(dir).length, 3000 + names.length);
    // A lock naming a process that is gone (an edit killed midway) is no reason to wait.
    symlinkSync('999999999', join(dir, 'accounts.lock'));
    assert.equal((await add('after-a-kill')).code, 0);
    assert.ok(readAccountsFile(dir).some((a) => a.name === 'after-a-kill'));
    assert.equal(existsSync(join(dir, 'accounts.lock')), false);
  },
);

test(
  "accounts, run as root on the data directory of a server that runs as another user (systemd DynamicUser): the files it writes keep the directory's owner, and that server logs the new account in",
  TEST_OPTIONS,
  async (t) => {
    if (process.getuid?.() !== 0) return t.skip('needs root, to write as root into a directory another user owns');
    if (spawnSync('runuser', ['--help']).error !== undefined) return t.skip('runuser is not installed (util-linux)');
    buildIfStale();
    // node and the repository must be reachable by nobody (a node under /root, as npx installs one, is not).
    if (spawnSync('runuser', ['-u', 'nobody', '--', process.execPath, SERVER_BIN, '--version']).status !== 0)
      return t.skip(`the user nobody cannot run ${process.execPath} ${SERVER_BIN}`);
    const home = tempDir(t);
    const dir = join(home, 'data');
    mkdirSync(dir, { mode: 0o700 });
    const nobody = { uid: 65534, gid: 65534 };
    chownSync(home, nobody.uid, nobody.gid);
    chownSync(dir, nobody.uid, nobody.gid);
    const env = { ...cleanEnv(), USERS_PASSWORD_COST: '1' };
    // In a process group of its own: runuser killed alone would leave the server running, holding the pipes.
    const serve = () =>
      spawnChild(t, 'runuser', ['-u', 'nobody', '--', process.execPath, SERVER_BIN, '--port', '0', '--data', dir], {
        env: { ...env, USERS_ADMIN_PASSWORD: ADMIN_PASSWORD },
        group: true,
      });
    const first = serve();
    await first.waitForLine(/^listening on /);
    first.process.kill('SIGTERM');
    await first.exited;
    const add = await runTool(
      t,
      process.execPath,
      [SERVER_BIN, 'accounts', 'add', 'alice', '--data', dir, '--password-stdin'],
      { input: 'alice-password-long\n', env },
    );
    assert.equal(add.code, 0, add.stderr);
    for (const name of readdirSync(dir).filter((n) => n !== 'lock'))
      assert.deepEqual([name, statSync(join(dir, name)).uid], [name, nobody.uid]);
    const server = serve();
    const url = (await server.waitForLine(/^listening on (\S+)/))[1]!;
    const login = await send(url, 'POST', '/login', {
      headers: { authorization: basic('alice', 'alice-password-long') },
    });
    assert.equal(login.status, 200, login.text);
  },
);
