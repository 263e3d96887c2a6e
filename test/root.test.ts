import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { test, type TestContext } from 'node:test';
import { verifySession } from '../server/security/session-token.js';
import { cookiePair, send, startTestServer, tempDir, type Reply, type TestServer } from './helpers.js';

// API.md endpoint row `GET, HEAD /` and "Sessions"; SPEC.md row 6.

const SECRET_A = 'secret-A-'.padEnd(40, 'a');
const SECRET_B = 'secret-B-'.padEnd(40, 'b');
const KEY_A = Buffer.from(SECRET_A);
const KEY_B = Buffer.from(SECRET_B);
const COOKIE_CHALLENGE = 'Cookie realm="users", cookie-name="USER_TOKEN", form-action="/login"';

function getRoot(url: string, cookie?: string, method = 'GET'): Promise<Reply> {
  return send(url, method, '/', cookie === undefined ? {} : { headers: { cookie } });
}

/** The token out of a "USER_TOKEN=token" pair. */
function tokenOf(pair: string): string {
  assert.ok(pair.startsWith('USER_TOKEN='), pair);
  return pair.slice('USER_TOKEN='.length);
}

function setCookies(reply: Reply): string[] {
  const value = reply.headers['set-cookie'];
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

function assertUnauthorized(reply: Reply, withBody = true): void {
  assert.equal(reply.status, 401);
  assert.equal(reply.text, withBody ? '"not authorized"' : '');
  assert.equal(reply.headers['content-type'], 'application/json');
  assert.equal(reply.headers['www-authenticate'], COOKIE_CHALLENGE);
  assert.equal(reply.headers['cache-control'], 'no-store');
  assert.equal(reply.headers['vary'], 'Cookie');
}

function assertOk(reply: Reply, withBody = true): void {
  assert.equal(reply.status, 200);
  assert.equal(reply.text, withBody ? '"OK"' : '');
  assert.equal(reply.headers['content-type'], 'application/json');
  assert.equal(reply.headers['www-authenticate'], undefined);
  assert.equal(reply.headers['cache-control'], 'no-store');
  assert.equal(reply.headers['vary'], 'Cookie');
}

async function serverWithSecrets(t: TestContext, secrets: string[], options = {}) {
  return startTestServer(t, { secrets }, options);
}

/**
 * One server's data directory started again with each list of secrets, as a rotation does (the previous start stopped
 * first).
 */
function rotation(t: TestContext): (secrets: string[]) => Promise<TestServer> {
  const data = tempDir(t);
  let previous: TestServer | undefined;
  return async (secrets) => {
    await previous?.running.stop();
    previous = await startTestServer(t, { data, store: 'memory', secrets });
    return previous;
  };
}

// --- GET / and HEAD / ------------------------------------------------------

test('GET / row 6: without a session it answers 401, body exactly "not authorized" as a JSON string, with the Cookie challenge', async (t) => {
  const server = await startTestServer(t);
  const reply = await getRoot(server.url);
  assertUnauthorized(reply);
  assert.equal(reply.headers['content-length'], String('"not authorized"'.length));
  assert.equal(JSON.parse(reply.text), 'not authorized');
});

test('GET / row 6: with a session it answers 200, body exactly "OK" as a JSON string, with Cache-Control: no-store and Vary: Cookie', async (t) => {
  const server = await startTestServer(t);
  const cookie = await server.login();
  const reply = await getRoot(server.url, cookie);
  assertOk(reply);
  assert.equal(reply.headers['content-length'], '4');
  assert.deepEqual(setCookies(reply), [], 'a current session is not re-issued');
});

test('HEAD / answers like GET / without a session: 401, same headers, no body', async (t) => {
  const server = await startTestServer(t);
  assertUnauthorized(await getRoot(server.url, undefined, 'HEAD'), false);
});

test('HEAD / answers like GET / with a session: 200, same headers, no body', async (t) => {
  const server = await startTestServer(t);
  const cookie = await server.login();
  assertOk(await getRoot(server.url, cookie, 'HEAD'), false);
});

test('GET / row 6: a plain USER_TOKEN=anything cookie the server did not sign answers 401', async (t) => {
  const server = await startTestServer(t);
  for (const value of ['anything', '', '1', 'true', 'admin', '"quoted"']) {
    assertUnauthorized(await getRoot(server.url, `USER_TOKEN=${value}`));
  }
});

test('GET / row 6: a valid token sent under another cookie name answers 401', async (t) => {
  const server = await startTestServer(t);
  const token = tokenOf(await server.login());
  assertUnauthorized(await getRoot(server.url, `user_token=${token}; SESSION=${token}; USER_TOKEN2=${token}`));
});

// --- tampering over HTTP ---------------------------------------------------

test('Sessions tamper table over HTTP: a sample of single-character flips of a valid token answers 401', async (t) => {
  const server = await serverWithSecrets(t, [SECRET_A]);
  const cookie = await server.login();
  assertOk(await getRoot(server.url, cookie)); // the control
  const token = tokenOf(cookie);
  const dot = token.lastIndexOf('.');
  const positions = [0, 1, Math.floor(dot / 2), dot - 1, dot, dot + 1, dot + 20, token.length - 2, token.length - 1];
  for (const i of positions) {
    for (const replacement of [String.fromCharCode(token.charCodeAt(i) ^ 1), token[i] === 'A' ? 'B' : 'A']) {
      const tampered = token.slice(0, i) + replacement + token.slice(i + 1);
      const reply = await getRoot(server.url, `USER_TOKEN=${tampered}`);
      assert.equal(reply.status, 401, `position ${i} -> ${replacement}`);
      assert.equal(reply.text, '"not authorized"');
    }
  }
});

test('Sessions tamper table over HTTP: junk appended, signature missing, payload only and an empty value answer 401', async (t) => {
  const server = await serverWithSecrets(t, [SECRET_A]);
  const token = tokenOf(await server.login());
  const dot = token.lastIndexOf('.');
  const cases = {
    'junk appended': token + 'junk',
    'signature missing': token.slice(0, dot + 1),
    'payload only': token.slice(0, dot),
    'signature only': token.slice(dot + 1),
    empty: '',
  };
  for (const [name, value] of Object.entries(cases)) {
    const reply = await getRoot(server.url, `USER_TOKEN=${value}`);
    assert.equal(reply.status, 401, name);
    assertUnauthorized(reply);
  }
});

test('Sessions: a token forged with the right key but for another cookie name answers 401', async (t) => {
  const server = await serverWithSecrets(t, [SECRET_A]);
  const token = tokenOf(await server.login());
  const payload = token.slice(0, token.lastIndexOf('.'));
  const forged = `${payload}.${createHmac('sha256', KEY_A).update(`OTHER=${payload}`).digest('base64url')}`;
  assertUnauthorized(await getRoot(server.url, `USER_TOKEN=${forged}`));
  // The control: the same construction over "USER_TOKEN=" is exactly the server's token.
  assert.equal(`${payload}.${createHmac('sha256', KEY_A).update(`USER_TOKEN=${payload}`).digest('base64url')}`, token);
});

test('Sessions: a login token carries the account and an expiry sessionTtl after issue, verifiable with the configured key', async (t) => {
  const server = await startTestServer(t, { secrets: [SECRET_A], sessionTtl: 600 });
  const token = tokenOf(await server.login());
  const verified = verifySession(token, [KEY_A], Math.floor(Date.now() / 1000));
  assert.ok(verified, 'the token verifies with the configured secret');
  assert.equal(verified.payload.account, 'admin');
  assert.equal(verified.payload.expiresAt - verified.payload.issuedAt, 600);
});

// --- key rotation ----------------------------------------------------------

test('Sessions: a token signed with a key later removed from the secrets answers 401', async (t) => {
  const restartWith = rotation(t);
  const serverA = await restartWith([SECRET_A]);
  const cookie = await serverA.login();
  assertOk(await getRoot(serverA.url, cookie));
  const serverB = await restartWith([SECRET_B]);
  const reply = await getRoot(serverB.url, cookie);
  assertUnauthorized(reply);
  assert.deepEqual(setCookies(reply), []);
});

test('Sessions: a token signed with an older key still listed answers 200 and is re-issued signed with the first key', async (t) => {
  const restartWith = rotation(t);
  const serverA = await restartWith([SECRET_A]);
  const oldToken = tokenOf(await serverA.login());
  const now = Math.floor(Date.now() / 1000);
  const before = verifySession(oldToken, [KEY_A], now);
  assert.ok(before);

  const rotated = await restartWith([SECRET_B, SECRET_A]);
  const reply = await getRoot(rotated.url, `USER_TOKEN=${oldToken}`);
  assertOk(reply);
  const cookies = setCookies(reply);
  assert.equal(cookies.length, 1, `one Set-Cookie re-issues the session: ${JSON.stringify(cookies)}`);
  const attributes = cookies[0]!.split('; ');
  assert.ok(
    attributes.includes('Path=/') && attributes.includes('HttpOnly') && attributes.includes('SameSite=Lax'),
    cookies[0],
  );
  const maxAge = attributes.find((a) => a.startsWith('Max-Age='));
  assert.ok(maxAge !== undefined && Number(maxAge.slice(8)) > 0 && Number(maxAge.slice(8)) <= 43200, cookies[0]);

  const newToken = tokenOf(cookiePair(cookies));
  assert.notEqual(newToken, oldToken);
  const after = verifySession(newToken, [KEY_B], now);
  assert.ok(after, 'the re-issued token verifies with the new key alone');
  assert.equal(after.keyIndex, 0);
  assert.equal(after.payload.account, before.payload.account);
  assert.equal(after.payload.expiresAt, before.payload.expiresAt, 're-issuing does not stretch the session');

  const onlyB = await restartWith([SECRET_B]);
  const again = await getRoot(onlyB.url, `USER_TOKEN=${newToken}`);
  assertOk(again);
  assert.deepEqual(setCookies(again), [], 'a token signed with the first key is not re-issued');
});

// --- expiry ----------------------------------------------------------------

test('Sessions: an expired token answers 401 (injected clock)', async (t) => {
  let now = Date.UTC(2026, 0, 1);
  const server = await startTestServer(t, { sessionTtl: 60 }, { clock: () => now });
  const cookie = await server.login();
  assertOk(await getRoot(server.url, cookie));
  now += 59_000;
  assertOk(await getRoot(server.url, cookie));
  now += 2_000;
  assertUnauthorized(await getRoot(server.url, cookie));
});

test('Sessions: with sessionTtl 1 a token stops passing GET / once its second is over', async (t) => {
  let now = Date.UTC(2026, 0, 1, 0, 0, 0, 500);
  const server = await startTestServer(t, { sessionTtl: 1 }, { clock: () => now });
  const cookie = await server.login();
  assertOk(await getRoot(server.url, cookie));
  now += 1000;
  assertUnauthorized(await getRoot(server.url, cookie));
});

// --- several cookies -------------------------------------------------------

test('Sessions: with several USER_TOKEN cookies the first that verifies wins: junk first, valid second answers 200', async (t) => {
  const server = await startTestServer(t);
  const cookie = await server.login();
  assertOk(await getRoot(server.url, `USER_TOKEN=junk; ${cookie}`));
  assertOk(await getRoot(server.url, `other=1; USER_TOKEN=; USER_TOKEN=x.y; ${cookie}; USER_TOKEN=after`));
});

test('Sessions: a revoked token first and a valid one second answers 200', async (t) => {
  const server = await startTestServer(t);
  const revoked = await server.login();
  const logout = await send(server.url, 'POST', '/logout', { headers: { cookie: revoked } });
  assert.equal(logout.status, 204);
  const valid = await server.login();
  assertUnauthorized(await getRoot(server.url, revoked));
  assertOk(await getRoot(server.url, `${revoked}; ${valid}`));
});

test('Sessions: fifty junk USER_TOKEN cookies answer 401 and the server keeps serving', async (t) => {
  const server = await startTestServer(t);
  const junk = Array.from({ length: 50 }, (_, i) => `USER_TOKEN=junk${i}.${'A'.repeat(43)}`).join('; ');
  assertUnauthorized(await getRoot(server.url, junk));
  const cookie = await server.login();
  assertOk(await getRoot(server.url, cookie));
  assertOk(await getRoot(server.url, `${junk}; ${cookie}`));
});
