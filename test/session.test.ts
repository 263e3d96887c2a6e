import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { test } from 'node:test';
import { parseBasicAuth } from '../server/security/credentials.js';
import { ServerUsageError } from '../server/errors.js';
import { parseConfig } from '../server/ops/config.js';
import { cookieValues, serializeCookie } from '../server/http/cookies.js';
import { MAX_TOKEN_LENGTH, signSession, verifySession, type SessionPayload } from '../server/security/session-token.js';

// Unit tests of the signed session token (API.md "Sessions"), the Cookie
// header parser, Set-Cookie serialization and Basic credentials parsing.

const KEY_A = Buffer.from('a'.repeat(32) + '-key-A-for-session-unit-tests');
const KEY_B = Buffer.from('b'.repeat(32) + '-key-B-for-session-unit-tests');
const NOW = 1_700_000_000; // seconds
const BASE64URL_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

const session: SessionPayload = {
  account: 'admin',
  sessionId: 'sid-0123456789abcdef',
  issuedAt: NOW,
  expiresAt: NOW + 3600,
};
const token = signSession(session, KEY_A);

/** The token format of API.md / the brief: base64url(payload) "." base64url(HMAC(key, "USER_TOKEN=" + payload)). */
function rawSign(payload: string, key: Buffer, cookieName = 'USER_TOKEN'): string {
  return `${payload}.${createHmac('sha256', key).update(`${cookieName}=${payload}`).digest('base64url')}`;
}

function encodePayload(fields: unknown): string {
  return Buffer.from(JSON.stringify(fields)).toString('base64url');
}

function replaceAt(s: string, i: number, c: string): string {
  return s.slice(0, i) + c + s.slice(i + 1);
}

// --- signSession / verifySession -------------------------------------------

test('Sessions: a token signed with the first key verifies and yields its payload with key index 0', () => {
  const verified = verifySession(token, [KEY_A], NOW);
  assert.deepEqual(verified, { payload: session, keyIndex: 0 });
});

test('Sessions: the token is base64url(payload) "." base64url(HMAC-SHA256(key, "USER_TOKEN=" payload))', () => {
  const dot = token.lastIndexOf('.');
  assert.equal(rawSign(token.slice(0, dot), KEY_A), token);
  assert.match(token, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
});

test('Sessions: the payload carries account, session id, issued-at and expiry', () => {
  const decoded = Buffer.from(token.slice(0, token.lastIndexOf('.')), 'base64url').toString('utf8');
  const text = JSON.stringify(JSON.parse(decoded));
  for (const value of ['"admin"', `"${session.sessionId}"`, String(session.issuedAt), String(session.expiresAt)]) {
    assert.ok(text.includes(value), `payload ${text} lacks ${value}`);
  }
});

test('Sessions: two sessions with different ids get different tokens', () => {
  assert.notEqual(signSession({ ...session, sessionId: 'other' }, KEY_A), token);
});

test('Sessions: the first key signs, all verify: a token signed by an older key verifies with key index above 0', () => {
  assert.deepEqual(verifySession(signSession(session, KEY_A), [KEY_B, KEY_A], NOW), { payload: session, keyIndex: 1 });
  assert.deepEqual(verifySession(signSession(session, KEY_B), [KEY_B, KEY_A], NOW), { payload: session, keyIndex: 0 });
});

test('Sessions: a token signed with a key removed from the list does not verify', () => {
  assert.equal(verifySession(token, [KEY_B], NOW), undefined);
  assert.equal(verifySession(token, [], NOW), undefined);
});

test('Sessions: an expired token does not verify; one second before expiry it does', () => {
  assert.notEqual(verifySession(token, [KEY_A], session.expiresAt - 1), undefined);
  assert.equal(verifySession(token, [KEY_A], session.expiresAt), undefined);
  assert.equal(verifySession(token, [KEY_A], session.expiresAt + 1), undefined);
});

test('Sessions: the cookie name is part of the signed text: a token signed for another cookie name does not verify as USER_TOKEN', () => {
  const payload = token.slice(0, token.lastIndexOf('.'));
  for (const name of ['OTHER', 'user_token', 'USER_TOKEN2', '']) {
    assert.equal(verifySession(rawSign(payload, KEY_A, name), [KEY_A], NOW), undefined, name);
  }
  // The control: the same construction with the right name verifies.
  assert.notEqual(verifySession(rawSign(payload, KEY_A, 'USER_TOKEN'), [KEY_A], NOW), undefined);
});

test('Sessions tamper table: every single character of a valid token XOR 1 never verifies', () => {
  const accepted: number[] = [];
  for (let i = 0; i < token.length; i++) {
    const flipped = replaceAt(token, i, String.fromCharCode(token.charCodeAt(i) ^ 1));
    if (verifySession(flipped, [KEY_A, KEY_B], NOW) !== undefined) accepted.push(i);
  }
  assert.deepEqual(accepted, [], `flipped positions that still verified: ${accepted.join(', ')}`);
});

test('Sessions tamper table: every single character replaced by any other base64url character never verifies', () => {
  const accepted: string[] = [];
  for (let i = 0; i < token.length; i++) {
    for (const c of BASE64URL_CHARS) {
      if (c === token[i]) continue;
      if (verifySession(replaceAt(token, i, c), [KEY_A, KEY_B], NOW) !== undefined) accepted.push(`${i}:${c}`);
    }
  }
  // Covers the last signature character too, whose low bits are padding: a
  // non-canonical encoding of the same HMAC bytes must not pass.
  assert.deepEqual(accepted, []);
});

const malformed: { name: string; value: string }[] = [
  { name: 'empty', value: '' },
  { name: 'payload only', value: token.slice(0, token.lastIndexOf('.')) },
  { name: 'signature missing after the dot', value: token.slice(0, token.lastIndexOf('.') + 1) },
  { name: 'signature only', value: token.slice(token.lastIndexOf('.')) },
  { name: 'signature without dot', value: token.slice(token.lastIndexOf('.') + 1) },
  { name: 'a lone dot', value: '.' },
  { name: 'junk appended', value: token + 'x' },
  { name: 'a character appended to the signature', value: token + 'A' },
  { name: 'a second signature appended', value: token + '.' + token.slice(token.lastIndexOf('.') + 1) },
  { name: 'padding appended', value: token + '=' },
  { name: 'a space appended', value: token + ' ' },
  { name: 'a character prepended', value: 'A' + token },
  { name: 'last character removed', value: token.slice(0, -1) },
  { name: 'first character removed', value: token.slice(1) },
  {
    name: 'payload and signature swapped',
    value: `${token.slice(token.lastIndexOf('.') + 1)}.${token.slice(0, token.lastIndexOf('.'))}`,
  },
  {
    name: 'signature in standard base64 with padding',
    value: `${token.slice(0, token.lastIndexOf('.'))}.${Buffer.from(token.slice(token.lastIndexOf('.') + 1), 'base64url').toString('base64')}`,
  },
  {
    name: 'signature uppercased',
    value: `${token.slice(0, token.lastIndexOf('.'))}.${token.slice(token.lastIndexOf('.') + 1).toUpperCase()}`,
  },
  { name: 'non-ASCII characters', value: 'é'.repeat(10) + '.' + 'ü'.repeat(43) },
  {
    name: 'an unsigned payload with a plausible signature length',
    value: `${encodePayload({ a: 'admin', s: 'x', i: NOW, e: NOW + 60 })}.${'A'.repeat(43)}`,
  },
  { name: 'a plain word', value: 'anything' },
  { name: 'longer than a cookie can be', value: 'A'.repeat(MAX_TOKEN_LENGTH + 1) },
];

for (const c of malformed) {
  test(`Sessions tamper table: a token that is ${c.name} never verifies`, () => {
    assert.equal(verifySession(c.value, [KEY_A, KEY_B], NOW), undefined);
  });
}

const signedButInvalid: { name: string; payload: string }[] = [
  { name: 'a payload that is not JSON', payload: Buffer.from('not json').toString('base64url') },
  { name: 'a JSON null payload', payload: encodePayload(null) },
  { name: 'a JSON array payload', payload: encodePayload(['admin', 'sid', NOW, NOW + 60]) },
  { name: 'a payload without an expiry', payload: encodePayload({ a: 'admin', s: 'sid', i: NOW }) },
  {
    name: 'a payload with a string expiry',
    payload: encodePayload({ a: 'admin', s: 'sid', i: NOW, e: String(NOW + 60) }),
  },
  { name: 'a payload without an account', payload: encodePayload({ s: 'sid', i: NOW, e: NOW + 60 }) },
  { name: 'a payload that is not base64url', payload: 'e30=' },
];

for (const c of signedButInvalid) {
  test(`Sessions: a correctly signed token with ${c.name} does not verify and does not throw`, () => {
    assert.equal(verifySession(rawSign(c.payload, KEY_A), [KEY_A], NOW), undefined);
  });
}

test('Sessions: a token fits in a cookie under 4096 bytes, and MAX_TOKEN_LENGTH keeps "USER_TOKEN=" + token under 4096', () => {
  assert.ok(`USER_TOKEN=${token}`.length < 4096);
  assert.ok('USER_TOKEN='.length + MAX_TOKEN_LENGTH <= 4096);
});

// --- cookies.ts ------------------------------------------------------------

const cookieCases: { name: string; header: string | undefined; want: string[] }[] = [
  { name: 'no Cookie header', header: undefined, want: [] },
  { name: 'an empty Cookie header', header: '', want: [] },
  { name: 'a single pair', header: 'USER_TOKEN=abc', want: ['abc'] },
  { name: 'pairs in header order', header: 'USER_TOKEN=first; other=x; USER_TOKEN=second', want: ['first', 'second'] },
  { name: 'whitespace around pairs', header: '  USER_TOKEN = abc ;other=1', want: ['abc'] },
  { name: 'no space after the semicolon', header: 'a=1;USER_TOKEN=abc;b=2', want: ['abc'] },
  { name: 'a DQUOTEd value', header: 'USER_TOKEN="abc"', want: ['abc'] },
  { name: 'a value containing "="', header: 'USER_TOKEN=a=b', want: ['a=b'] },
  { name: 'an empty value', header: 'USER_TOKEN=', want: [''] },
  { name: 'other cookie names only', header: 'USER_TOKEN2=a; XUSER_TOKEN=b; user_token=c', want: [] },
  { name: 'a pair without "="', header: 'USER_TOKEN; USER_TOKEN=ok', want: ['ok'] },
  { name: 'the name inside another cookie value', header: 'other=USER_TOKEN=x', want: [] },
];

for (const c of cookieCases) {
  test(`Cookie header parsing (RFC 6265 4.2.1): ${c.name} yields ${JSON.stringify(c.want)}`, () => {
    assert.deepEqual(cookieValues(c.header, 'USER_TOKEN'), c.want);
  });
}

test('Cookie header parsing: fifty USER_TOKEN pairs all come back in order', () => {
  const header = Array.from({ length: 50 }, (_, i) => `USER_TOKEN=v${i}`).join('; ');
  assert.deepEqual(
    cookieValues(header, 'USER_TOKEN'),
    Array.from({ length: 50 }, (_, i) => `v${i}`),
  );
});

test('Set-Cookie: the session cookie carries Path=/; HttpOnly; SameSite=Lax; Max-Age', () => {
  assert.equal(
    serializeCookie('USER_TOKEN', 'v', { maxAge: 43200, secure: false }),
    'USER_TOKEN=v; Path=/; HttpOnly; SameSite=Lax; Max-Age=43200',
  );
});

test('Set-Cookie: with cookieSecure the cookie also carries Secure', () => {
  const cookie = serializeCookie('USER_TOKEN', 'v', { maxAge: 60, secure: true });
  assert.deepEqual(
    cookie.split('; ').sort(),
    ['HttpOnly', 'Max-Age=60', 'Path=/', 'SameSite=Lax', 'Secure', 'USER_TOKEN=v'].sort(),
  );
});

test('Set-Cookie: a clearing cookie has an empty value and Max-Age=0', () => {
  const cookie = serializeCookie('USER_TOKEN', '', { maxAge: 0, secure: false });
  assert.ok(cookie.startsWith('USER_TOKEN=;'), cookie);
  assert.ok(cookie.split('; ').includes('Max-Age=0'), cookie);
});

// --- parseBasicAuth --------------------------------------------------------

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');

const basicCases: { name: string; header: string | undefined; want: { user: string; password: string } | undefined }[] =
  [
    { name: 'curl-style Basic admin:pw', header: `Basic ${b64('admin:pw')}`, want: { user: 'admin', password: 'pw' } },
    { name: 'a lowercase scheme', header: `basic ${b64('admin:pw')}`, want: { user: 'admin', password: 'pw' } },
    {
      name: 'a password containing colons',
      header: `Basic ${b64('admin:a:b:c')}`,
      want: { user: 'admin', password: 'a:b:c' },
    },
    { name: 'an empty password', header: `Basic ${b64('admin:')}`, want: { user: 'admin', password: '' } },
    { name: 'UTF-8 credentials', header: `Basic ${b64('zoë:pässwörd')}`, want: { user: 'zoë', password: 'pässwörd' } },
    { name: 'no header', header: undefined, want: undefined },
    { name: 'an empty header', header: '', want: undefined },
    { name: 'the scheme alone', header: 'Basic', want: undefined },
    { name: 'Basic !!!', header: 'Basic !!!', want: undefined },
    { name: 'Bearer x', header: 'Bearer x', want: undefined },
    { name: 'credentials without a colon', header: `Basic ${b64('adminpw')}`, want: undefined },
    { name: 'a scheme glued to the credentials', header: `Basic${b64('admin:pw')}`, want: undefined },
    { name: 'two credentials', header: `Basic ${b64('admin:pw')} ${b64('x:y')}`, want: undefined },
  ];

for (const c of basicCases) {
  test(`parseBasicAuth (RFC 7617): ${c.name} -> ${c.want === undefined ? 'undefined' : JSON.stringify(c.want)}`, () => {
    assert.deepEqual(parseBasicAuth(c.header), c.want);
  });
}

// --- secrets in parseConfig ------------------------------------------------

const secretCases: { name: string; argv: string[]; env: Record<string, string>; ok: boolean }[] = [
  { name: 'a 31-byte --secret is refused', argv: ['--secret', 'x'.repeat(31)], env: {}, ok: false },
  { name: 'a 31-byte USERS_SECRET is refused', argv: [], env: { USERS_SECRET: 'x'.repeat(31) }, ok: false },
  {
    name: 'a list with one short secret is refused',
    argv: ['--secret', `${'x'.repeat(32)},short`],
    env: {},
    ok: false,
  },
  { name: 'a list with an empty entry is refused', argv: ['--secret', `${'x'.repeat(32)},`], env: {}, ok: false },
  { name: 'a 32-byte secret is accepted', argv: ['--secret', 'x'.repeat(32)], env: {}, ok: true },
  {
    name: 'sixteen two-byte characters make 32 bytes and are accepted',
    argv: ['--secret', 'é'.repeat(16)],
    env: {},
    ok: true,
  },
];

for (const c of secretCases) {
  test(`Sessions secrets (at least 32 bytes each): ${c.name}`, () => {
    if (c.ok) {
      const { config } = parseConfig(c.argv, c.env);
      assert.deepEqual(config.secrets, [c.argv[1]]);
    } else {
      assert.throws(() => parseConfig(c.argv, c.env), ServerUsageError);
    }
  });
}

test('Sessions secrets: a comma-separated list keeps its order, the first signs', () => {
  const first = 'f'.repeat(32);
  const second = 's'.repeat(40);
  assert.deepEqual(parseConfig(['--secret', `${first},${second}`], {}).config.secrets, [first, second]);
});
