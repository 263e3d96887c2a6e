/**
 * The server's command-line parser (API.md "Server command line"):
 * defaults, USERS_* environment variables, "a flag beats the environment",
 * and bad flags or values refused with one ServerUsageError line.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseConfig, type Config } from '../server/ops/config.js';
import { assertUsageError, configOf } from './helpers.js';

const SECRET_A = 'a'.repeat(32);
const SECRET_B = 'b'.repeat(40);

/** API.md "Server command line" defaults, plus --max-reservations (API.md "Reservations"). */
const DEFAULTS: Config = {
  host: '127.0.0.1',
  port: 8080,
  data: './data',
  reservationTtl: 300,
  sessionTtl: 43200,
  changesRetention: 3600,
  allowIdChange: false,
  requireSession: 'all',
  requireIfMatch: false,
  maxBody: 16384,
  maxReservations: 100000,
  cookieSecure: false,
  store: 'journal',
  compactionFloor: 8 * 1024 * 1024,
  secrets: [],
  secretFile: '',
  configFile: '',
  tlsCert: '',
  tlsKey: '',
  rateLimit: 0,
  rateBurst: 0,
  trustProxy: false,
  allowedHosts: [],
  maxConnections: 0,
  maxConnectionsPerClient: 0,
  loginConcurrency: 2,
  loginFailuresPerMinute: 600,
  logFormat: 'text',
  loginPage: false,
  noConsole: false,
  passwordCost: 15,
  dbPool: 10,
  dbTimeout: 5,
  dbStartWait: 30,
};

test('Server command line: with no flags and no environment every setting has its API.md default', () => {
  const parsed = parseConfig([], {});
  assert.deepEqual(parsed.config, DEFAULTS);
  assert.equal(parsed.help, false);
  assert.equal(parsed.version, false);
});

test('Server command line: USERS_* variables of unrelated names are ignored', () => {
  assert.deepEqual(configOf([], { USERS_NOPE: '1', PORT: '1234', DATA: '/elsewhere' }), DEFAULTS);
});

// ------------------------------------------------------------ flags and environment

interface SettingCase {
  flag: string;
  env: string;
  /** Value given by flag (`undefined`: a boolean flag given bare). */
  flagValue: string | undefined;
  /** A different value given by environment. */
  envValue: string;
  key: keyof Config;
  fromFlag: unknown;
  fromEnv: unknown;
}

const settings: SettingCase[] = [
  {
    flag: 'host',
    env: 'USERS_HOST',
    flagValue: '0.0.0.0',
    envValue: '::1',
    key: 'host',
    fromFlag: '0.0.0.0',
    fromEnv: '::1',
  },
  { flag: 'port', env: 'USERS_PORT', flagValue: '0', envValue: '9090', key: 'port', fromFlag: 0, fromEnv: 9090 },
  {
    flag: 'data',
    env: 'USERS_DATA',
    flagValue: '/tmp/flag-data',
    envValue: '/tmp/env-data',
    key: 'data',
    fromFlag: '/tmp/flag-data',
    fromEnv: '/tmp/env-data',
  },
  {
    flag: 'reservation-ttl',
    env: 'USERS_RESERVATION_TTL',
    flagValue: '5',
    envValue: '60',
    key: 'reservationTtl',
    fromFlag: 5,
    fromEnv: 60,
  },
  {
    flag: 'session-ttl',
    env: 'USERS_SESSION_TTL',
    flagValue: '7',
    envValue: '3600',
    key: 'sessionTtl',
    fromFlag: 7,
    fromEnv: 3600,
  },
  {
    flag: 'require-session',
    env: 'USERS_REQUIRE_SESSION',
    flagValue: 'none',
    envValue: 'writes',
    key: 'requireSession',
    fromFlag: 'none',
    fromEnv: 'writes',
  },
  {
    flag: 'max-body',
    env: 'USERS_MAX_BODY',
    flagValue: '1024',
    envValue: '65536',
    key: 'maxBody',
    fromFlag: 1024,
    fromEnv: 65536,
  },
  {
    flag: 'max-reservations',
    env: 'USERS_MAX_RESERVATIONS',
    flagValue: '3',
    envValue: '500',
    key: 'maxReservations',
    fromFlag: 3,
    fromEnv: 500,
  },
  {
    flag: 'allowed-hosts',
    env: 'USERS_ALLOWED_HOSTS',
    flagValue: 'Users.Example.org,::1',
    envValue: '*',
    key: 'allowedHosts',
    fromFlag: ['users.example.org', '[::1]'],
    fromEnv: ['*'],
  },
  {
    flag: 'secret',
    env: 'USERS_SECRET',
    flagValue: `${SECRET_A},${SECRET_B}`,
    envValue: SECRET_B,
    key: 'secrets',
    fromFlag: [SECRET_A, SECRET_B],
    fromEnv: [SECRET_B],
  },
  // Booleans: a bare flag turns them on; the environment says 1/true or 0/false.
  {
    flag: 'allow-id-change',
    env: 'USERS_ALLOW_ID_CHANGE',
    flagValue: undefined,
    envValue: '0',
    key: 'allowIdChange',
    fromFlag: true,
    fromEnv: false,
  },
  {
    flag: 'require-if-match',
    env: 'USERS_REQUIRE_IF_MATCH',
    flagValue: undefined,
    envValue: 'false',
    key: 'requireIfMatch',
    fromFlag: true,
    fromEnv: false,
  },
  {
    flag: 'cookie-secure',
    env: 'USERS_COOKIE_SECURE',
    flagValue: undefined,
    envValue: '0',
    key: 'cookieSecure',
    fromFlag: true,
    fromEnv: false,
  },
  {
    flag: 'login-page',
    env: 'USERS_LOGIN_PAGE',
    flagValue: undefined,
    envValue: 'off',
    key: 'loginPage',
    fromFlag: true,
    fromEnv: false,
  },
  {
    flag: 'no-console',
    env: 'USERS_NO_CONSOLE',
    flagValue: undefined,
    envValue: 'false',
    key: 'noConsole',
    fromFlag: true,
    fromEnv: false,
  },
];

function flagArgs(c: SettingCase): string[] {
  return c.flagValue === undefined ? [`--${c.flag}`] : [`--${c.flag}`, c.flagValue];
}

for (const c of settings) {
  test(`Server command line: --${c.flag} sets ${c.key} and leaves every other setting at its default`, () => {
    assert.deepEqual(configOf(flagArgs(c)), { ...DEFAULTS, [c.key]: c.fromFlag });
  });

  if (c.flagValue !== undefined) {
    test(`Server command line: --${c.flag}=VALUE is the same as --${c.flag} VALUE`, () => {
      assert.deepEqual(configOf([`--${c.flag}=${c.flagValue}`]), { ...DEFAULTS, [c.key]: c.fromFlag });
    });
  }

  test(`Server command line: ${c.env} sets ${c.key} when --${c.flag} is not given`, () => {
    assert.deepEqual(configOf([], { [c.env]: c.envValue }), { ...DEFAULTS, [c.key]: c.fromEnv });
  });

  test(`Server command line: --${c.flag} beats ${c.env}`, () => {
    assert.deepEqual(configOf(flagArgs(c), { [c.env]: c.envValue }), { ...DEFAULTS, [c.key]: c.fromFlag });
  });
}

const booleanEnvs: { env: string; key: keyof Config }[] = [
  { env: 'USERS_ALLOW_ID_CHANGE', key: 'allowIdChange' },
  { env: 'USERS_REQUIRE_IF_MATCH', key: 'requireIfMatch' },
  { env: 'USERS_COOKIE_SECURE', key: 'cookieSecure' },
  { env: 'USERS_LOGIN_PAGE', key: 'loginPage' },
  { env: 'USERS_NO_CONSOLE', key: 'noConsole' },
];
const booleanSpellings: { value: string; expected: boolean }[] = [
  { value: '1', expected: true },
  { value: 'true', expected: true },
  { value: 'TRUE', expected: true },
  { value: '0', expected: false },
  { value: 'false', expected: false },
  { value: 'False', expected: false },
];
for (const b of booleanEnvs) {
  for (const s of booleanSpellings) {
    test(`Server command line: ${b.env}=${s.value} sets ${b.key} to ${s.expected}`, () => {
      assert.deepEqual(configOf([], { [b.env]: s.value }), { ...DEFAULTS, [b.key]: s.expected });
    });
  }
}

test('Server command line: all environment variables at once configure every setting', () => {
  const env: NodeJS.ProcessEnv = {};
  const expected: Record<string, unknown> = { ...DEFAULTS };
  for (const c of settings) {
    env[c.env] = c.flagValue ?? '1';
    expected[c.key] = c.fromFlag;
  }
  assert.deepEqual(configOf([], env), expected);
});

const accepted: { name: string; argv: string[]; key: keyof Config; value: unknown }[] = [
  { name: '--port 65535 is the highest port accepted', argv: ['--port', '65535'], key: 'port', value: 65535 },
  { name: '--port 0 asks for any free port', argv: ['--port', '0'], key: 'port', value: 0 },
  {
    name: '--require-session writes is accepted',
    argv: ['--require-session', 'writes'],
    key: 'requireSession',
    value: 'writes',
  },
  {
    name: '--require-session none is accepted',
    argv: ['--require-session', 'none'],
    key: 'requireSession',
    value: 'none',
  },
  {
    name: '--require-session all is accepted',
    argv: ['--require-session', 'all'],
    key: 'requireSession',
    value: 'all',
  },
  {
    name: '--allowed-hosts takes names, IPv4 and bracketed IPv6 addresses, spaces around commas trimmed',
    argv: ['--allowed-hosts', 'a.example, 192.0.2.7 ,[2001:DB8::1]'],
    key: 'allowedHosts',
    value: ['a.example', '192.0.2.7', '[2001:db8::1]'],
  },
  {
    name: 'a secret of exactly 32 bytes is accepted',
    argv: ['--secret', 'x'.repeat(32)],
    key: 'secrets',
    value: ['x'.repeat(32)],
  },
  // 11 euro signs are 11 characters but 33 UTF-8 bytes: the minimum counts bytes.
  {
    name: 'a secret is measured in bytes, not characters',
    argv: ['--secret', '€'.repeat(11)],
    key: 'secrets',
    value: ['€'.repeat(11)],
  },
];
for (const c of accepted) {
  test(`Server command line: ${c.name}`, () => {
    assert.deepEqual(configOf(c.argv), { ...DEFAULTS, [c.key]: c.value });
  });
}

test('Server command line: --help and -h ask for help, --version for the version, without failing on defaults', () => {
  assert.equal(parseConfig(['--help'], {}).help, true);
  assert.equal(parseConfig(['-h'], {}).help, true);
  assert.equal(parseConfig(['--version'], {}).version, true);
  assert.equal(parseConfig(['--version'], {}).help, false);
});

// ------------------------------------------------------------ refused

interface BadCase {
  name: string;
  argv: string[];
  env?: NodeJS.ProcessEnv;
  /** What the one-line message must name. */
  mentions: RegExp;
}

const bad: BadCase[] = [
  { name: '--port 70000 is out of range', argv: ['--port', '70000'], mentions: /port/ },
  { name: '--port 65536 is out of range', argv: ['--port', '65536'], mentions: /port/ },
  { name: '--port x is not a number', argv: ['--port', 'x'], mentions: /port/ },
  { name: '--port 1.5 is not an integer', argv: ['--port', '1.5'], mentions: /port/ },
  { name: '--port 8080abc is not an integer', argv: ['--port', '8080abc'], mentions: /port/ },
  { name: '--port=-1 is negative', argv: ['--port=-1'], mentions: /port/ },
  { name: '--port with an empty value', argv: ['--port='], mentions: /port/ },
  { name: '--port with no value at all', argv: ['--port'], mentions: /port/ },
  { name: 'USERS_PORT=x is not a number', argv: [], env: { USERS_PORT: 'x' }, mentions: /port/i },
  {
    name: '--require-session maybe is not none, writes or all',
    argv: ['--require-session', 'maybe'],
    mentions: /require-session/,
  },
  {
    name: 'USERS_REQUIRE_SESSION=maybe is not none, writes or all',
    argv: [],
    env: { USERS_REQUIRE_SESSION: 'maybe' },
    mentions: /require.session/i,
  },
  { name: '--max-body -1 is negative', argv: ['--max-body', '-1'], mentions: /max-body/ },
  { name: '--max-body=-1 is negative', argv: ['--max-body=-1'], mentions: /max-body/ },
  { name: '--max-body x is not a number', argv: ['--max-body', 'x'], mentions: /max-body/ },
  { name: '--reservation-ttl 0 is not positive', argv: ['--reservation-ttl', '0'], mentions: /reservation-ttl/ },
  { name: '--session-ttl 0 is not positive', argv: ['--session-ttl', '0'], mentions: /session-ttl/ },
  { name: '--max-reservations 0 is not positive', argv: ['--max-reservations', '0'], mentions: /max-reservations/ },
  {
    name: '--allowed-hosts with a port',
    argv: ['--allowed-hosts', 'users.example.org:8080'],
    mentions: /allowed-hosts: "users\.example\.org:8080" is not a host name or address/,
  },
  {
    name: '--allowed-hosts with a scheme',
    argv: ['--allowed-hosts', 'https://users.example.org'],
    mentions: /allowed-hosts/,
  },
  {
    name: '--allowed-hosts with an empty entry',
    argv: ['--allowed-hosts', 'a.example,,b.example'],
    mentions: /allowed-hosts: ""/,
  },
  {
    name: 'USERS_ALLOWED_HOSTS with a bracketed address that is not IPv6',
    argv: [],
    env: { USERS_ALLOWED_HOSTS: '[1:2]' },
    mentions: /USERS_ALLOWED_HOSTS/,
  },
  { name: 'an unknown flag --nope', argv: ['--nope'], mentions: /nope/ },
  { name: 'a positional argument', argv: ['extra'], mentions: /extra/ },
  { name: 'a value given to a boolean flag', argv: ['--allow-id-change=yes'], mentions: /allow-id-change/ },
  {
    name: 'USERS_ALLOW_ID_CHANGE=perhaps is not a boolean',
    argv: [],
    env: { USERS_ALLOW_ID_CHANGE: 'perhaps' },
    mentions: /USERS_ALLOW_ID_CHANGE/,
  },
  {
    name: 'USERS_COOKIE_SECURE=perhaps is not a boolean',
    argv: [],
    env: { USERS_COOKIE_SECURE: 'perhaps' },
    mentions: /USERS_COOKIE_SECURE/,
  },
  { name: 'a --secret shorter than 32 bytes', argv: ['--secret', 'short'], mentions: /secret/ },
  { name: 'a --secret of 31 bytes', argv: ['--secret', 'x'.repeat(31)], mentions: /secret/ },
  { name: 'a short secret after a good one in --secret', argv: ['--secret', `${SECRET_A},short`], mentions: /secret/ },
  {
    name: 'an empty secret between commas in --secret',
    argv: ['--secret', `${SECRET_A},,${SECRET_B}`],
    mentions: /secret/,
  },
  { name: 'a short USERS_SECRET', argv: [], env: { USERS_SECRET: 'short' }, mentions: /secret/i },
  { name: '--host with an empty value', argv: ['--host='], mentions: /host/ },
  { name: '--data with an empty value', argv: ['--data='], mentions: /data/ },
];

for (const c of bad) {
  test(`Server command line: ${c.name}: ServerUsageError with one clear line`, () => {
    assertUsageError(c.argv, c.env ?? {}, c.mentions);
  });
}

test('Server command line: a bad environment value is refused even when a flag of another name is good', () => {
  assertUsageError(['--port', '0'], { USERS_MAX_BODY: 'lots' }, /max-body|MAX_BODY/);
});

test('Server command line: a good flag hides a bad environment value of the same setting', () => {
  // The flag wins, so the environment's value is never used; refusing it
  // would make USERS_PORT impossible to override on the command line.
  assert.equal(configOf(['--port', '0'], { USERS_PORT: 'x' }).port, 0);
});
