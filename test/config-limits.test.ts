/**
 * The rate-limit and proxy flags (API.md "Access control and limits" and
 * "Server command line"): `--rate-limit`, `--rate-burst`, `--trust-proxy`,
 * their USERS_* variables, defaults, and bad values refused with one
 * ServerUsageError line.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { usage, type Config } from '../server/ops/config.js';
import { assertUsageError, configOf } from './helpers.js';

test('Server command line: rate limiting is off by default (--rate-limit 0), the burst follows the rate, and no proxy is trusted', () => {
  const c = configOf([]);
  assert.equal(c.rateLimit, 0);
  assert.equal(c.rateBurst, 0, '0: equal to --rate-limit');
  assert.equal(c.trustProxy, false);
});

const cases: { name: string; argv: string[]; env?: NodeJS.ProcessEnv; expected: Partial<Config> }[] = [
  {
    name: '--rate-limit sets requests per second',
    argv: ['--rate-limit', '10'],
    expected: { rateLimit: 10, rateBurst: 0 },
  },
  {
    name: 'USERS_RATE_LIMIT sets it from the environment',
    argv: [],
    env: { USERS_RATE_LIMIT: '20' },
    expected: { rateLimit: 20 },
  },
  {
    name: '--rate-limit beats USERS_RATE_LIMIT',
    argv: ['--rate-limit', '5'],
    env: { USERS_RATE_LIMIT: '20' },
    expected: { rateLimit: 5 },
  },
  {
    name: '--rate-burst sets the bucket size',
    argv: ['--rate-limit', '10', '--rate-burst', '50'],
    expected: { rateLimit: 10, rateBurst: 50 },
  },
  {
    name: '--rate-burst may be smaller than the rate',
    argv: ['--rate-limit', '100', '--rate-burst', '10'],
    expected: { rateLimit: 100, rateBurst: 10 },
  },
  {
    name: 'USERS_RATE_BURST sets it from the environment',
    argv: ['--rate-limit', '1'],
    env: { USERS_RATE_BURST: '7' },
    expected: { rateBurst: 7 },
  },
  {
    name: '--rate-burst beats USERS_RATE_BURST',
    argv: ['--rate-limit', '1', '--rate-burst', '3'],
    env: { USERS_RATE_BURST: '7' },
    expected: { rateBurst: 3 },
  },
  {
    name: '--rate-burst 0 is the default: equal to the rate',
    argv: ['--rate-limit', '4', '--rate-burst', '0'],
    expected: { rateLimit: 4, rateBurst: 0 },
  },
  {
    name: 'the largest rate and burst are 1000000',
    argv: ['--rate-limit', '1000000', '--rate-burst', '1000000'],
    expected: { rateLimit: 1_000_000, rateBurst: 1_000_000 },
  },
  { name: '--trust-proxy turns proxy trust on', argv: ['--trust-proxy'], expected: { trustProxy: true } },
  {
    name: 'USERS_TRUST_PROXY=true turns it on from the environment',
    argv: [],
    env: { USERS_TRUST_PROXY: 'true' },
    expected: { trustProxy: true },
  },
  {
    name: 'USERS_TRUST_PROXY=0 leaves it off',
    argv: [],
    env: { USERS_TRUST_PROXY: '0' },
    expected: { trustProxy: false },
  },
  {
    name: '--trust-proxy beats USERS_TRUST_PROXY=off',
    argv: ['--trust-proxy'],
    env: { USERS_TRUST_PROXY: 'off' },
    expected: { trustProxy: true },
  },
];
for (const c of cases) {
  test(`Server command line: ${c.name}`, () => {
    const parsed = configOf(c.argv, c.env ?? {});
    for (const [key, value] of Object.entries(c.expected)) assert.equal(parsed[key as keyof Config], value, key);
  });
}

const bad: { name: string; argv: string[]; env?: NodeJS.ProcessEnv; mentions: RegExp }[] = [
  { name: 'a negative rate', argv: ['--rate-limit', '-1'], mentions: /--rate-limit/ },
  {
    name: 'a fractional rate',
    argv: ['--rate-limit', '1.5'],
    mentions: /--rate-limit must be an integer from 0 to 1000000/,
  },
  { name: 'a rate above 1000000', argv: ['--rate-limit', '1000001'], mentions: /--rate-limit/ },
  { name: 'a rate that is no number', argv: ['--rate-limit', 'fast'], mentions: /--rate-limit/ },
  { name: 'an empty rate', argv: ['--rate-limit', ''], mentions: /--rate-limit/ },
  {
    name: 'a bad USERS_RATE_LIMIT',
    argv: [],
    env: { USERS_RATE_LIMIT: '10/s' },
    mentions: /^USERS_RATE_LIMIT must be an integer/,
  },
  { name: 'a burst above 1000000', argv: ['--rate-limit', '1', '--rate-burst', '1000001'], mentions: /--rate-burst/ },
  { name: 'a fractional burst', argv: ['--rate-limit', '1', '--rate-burst', '2.5'], mentions: /--rate-burst/ },
  { name: 'a burst without a rate', argv: ['--rate-burst', '5'], mentions: /--rate-burst needs --rate-limit/ },
  {
    name: 'USERS_RATE_BURST without a rate',
    argv: [],
    env: { USERS_RATE_BURST: '5' },
    mentions: /--rate-burst needs --rate-limit/,
  },
  { name: 'a value given to --trust-proxy', argv: ['--trust-proxy=yes'], mentions: /trust-proxy/ },
  {
    name: 'a USERS_TRUST_PROXY that is no boolean',
    argv: [],
    env: { USERS_TRUST_PROXY: 'maybe' },
    mentions: /USERS_TRUST_PROXY/,
  },
];
for (const c of bad) {
  test(`Server command line: ${c.name} is refused with one line`, () => {
    assertUsageError(c.argv, c.env ?? {}, c.mentions);
  });
}

test('Server command line: --help lists --rate-limit, --rate-burst and --trust-proxy with their environment variables', () => {
  const help = usage();
  for (const [flag, env] of [
    ['--rate-limit', 'USERS_RATE_LIMIT'],
    ['--rate-burst', 'USERS_RATE_BURST'],
    ['--trust-proxy', 'USERS_TRUST_PROXY'],
  ] as const) {
    assert.match(help, new RegExp(`^  ${flag}\\b(?:(?!\\n  --)[\\s\\S])*${env}`, 'm'), `--help lines of ${flag}`);
  }
});
