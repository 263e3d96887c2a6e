/**
 * API.md "PUT rules" 1-8, `Prefer: return=minimal` from "Endpoints", and the
 * user rules of "Users and references" as a PUT meets them. Every refusal is
 * checked against rule 8: the state read back afterwards is unchanged, no id
 * was consumed and no reservation was used up.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { Config } from '../server/ops/config.js';
import { put, send, startTestServer, type Reply, type TestServer, assertProblem, listText } from './helpers.js';

// A fixed instant on a whole second, for the injectable clock.
const T0 = Date.UTC(2031, 4, 6, 7, 8, 9);

/** A PUT of a raw body: `contentType` null sends no Content-Type at all. */
function putRaw(
  server: TestServer,
  path: string,
  body: string | Buffer,
  contentType: string | null = 'application/json',
  headers: Record<string, string> = {},
): Promise<Reply> {
  return send(server.url, 'PUT', path, {
    body,
    headers: contentType === null ? headers : { 'content-type': contentType, ...headers },
  });
}

function get(server: TestServer, path: string, headers: Record<string, string> = {}): Promise<Reply> {
  return send(server.url, 'GET', path, { headers });
}

async function etagOf(server: TestServer, path: string): Promise<string> {
  const read = await get(server, path);
  assert.equal(read.status, 200, `GET ${path}`);
  const etag = read.headers.etag;
  assert.equal(typeof etag, 'string', `GET ${path} has an ETag`);
  return etag as string;
}

/**
 * The fixture every refusal runs against:
 *   user 1 "Ann" created through the alias "ann";
 *   id 2 reserved and live;
 *   id 3 assigned by POST /users/new, then deleted.
 * So the next id to issue is 4.
 */
async function fixture(t: TestContext, overrides: Partial<Config> = {}): Promise<TestServer> {
  const server = await startTestServer(t, overrides);
  const ann = await put(server.url, '/users/ann', { name: 'Ann', team: { lead: true } });
  assert.equal(ann.status, 201, ann.text);
  assert.equal(ann.headers.location, '/users/1');
  const reserved = await send(server.url, 'POST', '/reservations');
  assert.equal(reserved.status, 201);
  assert.equal(reserved.headers.location, '/users/2');
  const temp = await send(server.url, 'POST', '/users/new', { json: { name: 'Temp' } });
  assert.equal(temp.headers.location, '/users/3');
  // If-Match keeps the fixture valid under requireIfMatch too.
  const deleted = await send(server.url, 'DELETE', '/users/3', {
    headers: { 'if-match': await etagOf(server, '/users/3') },
  });
  assert.equal(deleted.status, 204);
  return server;
}

interface Snapshot {
  list: string;
  byId: { status: number; text: string; etag: unknown };
  byAlias: { status: number; text: string; etag: unknown };
  newAlias: number;
}

async function snapshot(server: TestServer): Promise<Snapshot> {
  const byId = await get(server, '/users/1');
  const byAlias = await get(server, '/users/ann');
  const newAlias = await get(server, '/users/fresh');
  return {
    list: await listText(server),
    byId: { status: byId.status, text: byId.text, etag: byId.headers.etag },
    byAlias: { status: byAlias.status, text: byAlias.text, etag: byAlias.headers.etag },
    newAlias: newAlias.status,
  };
}

/**
 * Rule 8 on the fixture: the state reads back as before, the reservation of
 * id 2 is still live, id 3 is still gone, and the next id issued is 4.
 */
async function assertUnchanged(server: TestServer, before: Snapshot): Promise<void> {
  assert.deepEqual(await snapshot(server), before, 'rule 8: the state read back is unchanged');
  assertProblem(await put(server.url, '/users/3', { name: 'x' }), 410, 'gone', 'the deleted id 3 is still gone');
  const underReservation = await put(server.url, '/users/2', { name: 'Reserved' });
  assert.equal(underReservation.status, 201, `rule 8: the reservation of id 2 is still live: ${underReservation.text}`);
  const next = await send(server.url, 'POST', '/users/new', { json: { name: 'Next' } });
  assert.equal(next.headers.location, '/users/4', 'rule 8: no id was consumed');
}

interface Refusal {
  rule: string;
  name: string;
  path: string;
  body: string | Buffer;
  /** null: no Content-Type field. */
  contentType?: string | null;
  /** Request headers; `etag` is the current ETag of user 1. */
  headers?: (etag: string) => Record<string, string>;
  status: number;
  code: string;
  field?: string;
  overrides?: Partial<Config>;
}

const tooDeep = (levels: number) => `{"name":"x","a":${'{"a":'.repeat(levels - 2)}{}${'}'.repeat(levels - 2)}}`;

const refusals: Refusal[] = [
  // Rule 1: 415
  {
    rule: '1',
    name: 'a body without Content-Type',
    path: '/users/1',
    body: '{"name":"Bo"}',
    contentType: null,
    status: 415,
    code: 'unsupported-media-type',
  },
  {
    rule: '1',
    name: 'a body without Content-Type to a new alias',
    path: '/users/fresh',
    body: '{"name":"Bo"}',
    contentType: null,
    status: 415,
    code: 'unsupported-media-type',
  },
  {
    rule: '1',
    name: 'Content-Type text/plain',
    path: '/users/1',
    body: '{"name":"Bo"}',
    contentType: 'text/plain',
    status: 415,
    code: 'unsupported-media-type',
  },
  {
    rule: '1',
    name: 'Content-Type application/json;charset=latin1',
    path: '/users/1',
    body: '{"name":"Bo"}',
    contentType: 'application/json;charset=latin1',
    status: 415,
    code: 'unsupported-media-type',
  },
  {
    rule: '1',
    name: 'Content-Type application/json; charset=utf-16',
    path: '/users/1',
    body: '{"name":"Bo"}',
    contentType: 'application/json; charset=utf-16',
    status: 415,
    code: 'unsupported-media-type',
  },
  {
    rule: '1',
    name: 'Content-Type application/x-www-form-urlencoded',
    path: '/users/1',
    body: 'name=Bo',
    contentType: 'application/x-www-form-urlencoded',
    status: 415,
    code: 'unsupported-media-type',
  },
  {
    rule: '1',
    name: 'Content-Type text/json+xml (not an application/ +json type)',
    path: '/users/1',
    body: '{"name":"Bo"}',
    contentType: 'text/json+xml',
    status: 415,
    code: 'unsupported-media-type',
  },
  {
    rule: '1',
    name: 'Content-Type text/plain to a reserved id',
    path: '/users/2',
    body: '{"name":"Bo"}',
    contentType: 'text/plain',
    status: 415,
    code: 'unsupported-media-type',
  },
  // Rule 1: 400
  {
    rule: '1',
    name: 'unparseable JSON (cut off)',
    path: '/users/1',
    body: '{"name":',
    status: 400,
    code: 'invalid-json',
  },
  {
    rule: '1',
    name: 'unparseable JSON (single quotes)',
    path: '/users/1',
    body: "{'name':'Bo'}",
    status: 400,
    code: 'invalid-json',
  },
  { rule: '1', name: 'an empty body', path: '/users/1', body: '', status: 400, code: 'invalid-json' },
  {
    rule: '1',
    name: 'JSON followed by garbage',
    path: '/users/1',
    body: '{"name":"Bo"}x',
    status: 400,
    code: 'invalid-json',
  },
  {
    rule: '1',
    name: 'invalid UTF-8 in a string',
    path: '/users/1',
    body: Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]),
    status: 400,
    code: 'invalid-json',
  },
  {
    rule: '1',
    name: 'unparseable JSON to a new alias',
    path: '/users/fresh',
    body: '{',
    status: 400,
    code: 'invalid-json',
  },
  {
    rule: '1',
    name: 'unparseable JSON to a reserved id',
    path: '/users/2',
    body: '{',
    status: 400,
    code: 'invalid-json',
  },
  // Rule 1: 422, naming the field
  {
    rule: '1',
    name: 'a body without name',
    path: '/users/1',
    body: '{"nick":"Bo"}',
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
  {
    rule: '1',
    name: 'an empty name',
    path: '/users/1',
    body: '{"name":""}',
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
  {
    rule: '1',
    name: 'a name of 201 characters',
    path: '/users/1',
    body: JSON.stringify({ name: 'n'.repeat(201) }),
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
  {
    rule: '1',
    name: 'a name of 201 characters outside the BMP (402 UTF-16 units)',
    path: '/users/1',
    body: JSON.stringify({ name: '😀'.repeat(201) }),
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
  {
    rule: '1',
    name: 'a name with a lone surrogate (\\ud800)',
    path: '/users/1',
    body: '{"name":"a\\ud800b"}',
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
  {
    rule: '1',
    name: 'a name with a lone low surrogate and a control character',
    path: '/users/1',
    body: '{"name":"\\udc00\\u0001"}',
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
  {
    rule: '1',
    name: 'a name with a C0 control character (U+0001)',
    path: '/users/1',
    body: '{"name":"a\\u0001b"}',
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
  {
    rule: '1',
    name: 'a name with a newline',
    path: '/users/1',
    body: '{"name":"a\\nb"}',
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
  {
    rule: '1',
    name: 'a name with DEL (U+007F)',
    path: '/users/1',
    body: '{"name":"a\\u007fb"}',
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
  {
    rule: '1',
    name: 'a name with a C1 control character (U+0085)',
    path: '/users/1',
    body: '{"name":"a\\u0085b"}',
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
  {
    rule: '1',
    name: 'a name that is a number',
    path: '/users/1',
    body: '{"name":42}',
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
  {
    rule: '1',
    name: 'a name that is null',
    path: '/users/1',
    body: '{"name":null}',
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
  {
    rule: '1',
    name: 'a name that is an array',
    path: '/users/1',
    body: '{"name":["Bo"]}',
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
  {
    rule: '1',
    name: 'a name that is an object',
    path: '/users/1',
    body: '{"name":{"first":"Bo"}}',
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
  {
    rule: '1',
    name: 'a JSON array body',
    path: '/users/1',
    body: '[{"name":"Bo"}]',
    status: 422,
    code: 'invalid-user',
  },
  { rule: '1', name: 'a JSON string body', path: '/users/1', body: '"Bo"', status: 422, code: 'invalid-user' },
  { rule: '1', name: 'a JSON number body', path: '/users/1', body: '42', status: 422, code: 'invalid-user' },
  { rule: '1', name: 'a JSON null body', path: '/users/1', body: 'null', status: 422, code: 'invalid-user' },
  {
    rule: '1',
    name: 'a JSON array body to a new alias',
    path: '/users/fresh',
    body: '[]',
    status: 422,
    code: 'invalid-user',
  },
  {
    rule: '1',
    name: 'a body without name to a reserved id',
    path: '/users/2',
    body: '{}',
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
  {
    rule: '1',
    name: 'id 0',
    path: '/users/1',
    body: '{"name":"Bo","id":0}',
    status: 422,
    code: 'invalid-user',
    field: 'id',
  },
  {
    rule: '1',
    name: 'a negative id',
    path: '/users/1',
    body: '{"name":"Bo","id":-1}',
    status: 422,
    code: 'invalid-user',
    field: 'id',
  },
  {
    rule: '1',
    name: 'a fractional id',
    path: '/users/1',
    body: '{"name":"Bo","id":1.5}',
    status: 422,
    code: 'invalid-user',
    field: 'id',
  },
  {
    rule: '1',
    name: 'an id that is a string',
    path: '/users/1',
    body: '{"name":"Bo","id":"1"}',
    status: 422,
    code: 'invalid-user',
    field: 'id',
  },
  {
    rule: '1',
    name: 'an id that is null',
    path: '/users/1',
    body: '{"name":"Bo","id":null}',
    status: 422,
    code: 'invalid-user',
    field: 'id',
  },
  {
    rule: '1',
    name: 'an id of 2^53 (not a safe integer)',
    path: '/users/1',
    body: '{"name":"Bo","id":9007199254740992}',
    status: 422,
    code: 'invalid-user',
    field: 'id',
  },
  {
    rule: '1',
    name: 'a top-level __proto__ key',
    path: '/users/1',
    body: '{"name":"Bo","__proto__":{"polluted":1}}',
    status: 422,
    code: 'invalid-user',
    field: '__proto__',
  },
  {
    rule: '1',
    name: 'a top-level constructor key',
    path: '/users/1',
    body: '{"name":"Bo","constructor":{"prototype":{"polluted":1}}}',
    status: 422,
    code: 'invalid-user',
  },
  {
    rule: '1',
    name: 'a nested __proto__ key',
    path: '/users/1',
    body: '{"name":"Bo","a":{"b":{"__proto__":{"polluted":1}}}}',
    status: 422,
    code: 'invalid-user',
    field: 'a.b.__proto__',
  },
  {
    rule: '1',
    name: 'a nested prototype key',
    path: '/users/1',
    body: '{"name":"Bo","a":{"prototype":1}}',
    status: 422,
    code: 'invalid-user',
    field: 'a.prototype',
  },
  {
    rule: '1',
    name: 'a constructor key inside an array',
    path: '/users/1',
    body: '{"name":"Bo","a":[1,{"constructor":1}]}',
    status: 422,
    code: 'invalid-user',
  },
  {
    rule: '1',
    name: 'a forbidden key to a new alias',
    path: '/users/fresh',
    body: '{"name":"Bo","x":{"__proto__":1}}',
    status: 422,
    code: 'invalid-user',
  },
  { rule: '1', name: 'nesting of 17 levels', path: '/users/1', body: tooDeep(17), status: 422, code: 'invalid-user' },
  {
    rule: '1',
    name: 'nesting of 17 levels made of arrays',
    path: '/users/1',
    body: `{"name":"x","a":${'['.repeat(16)}${']'.repeat(16)}}`,
    status: 422,
    code: 'invalid-user',
  },
  // Rule 4
  {
    rule: '4',
    name: 'a PUT to the id of a deleted user',
    path: '/users/3',
    body: '{"name":"Bo"}',
    status: 410,
    code: 'gone',
  },
  {
    rule: '4',
    name: 'a PUT to the next id, never issued',
    path: '/users/4',
    body: '{"name":"Bo"}',
    status: 404,
    code: 'not-found',
  },
  {
    rule: '4',
    name: 'a PUT to a large id, never issued',
    path: '/users/123456789',
    body: '{"name":"Bo"}',
    status: 404,
    code: 'not-found',
  },
  // Rule 5
  {
    rule: '5',
    name: 'a body id different from the target id',
    path: '/users/1',
    body: '{"name":"Bo","id":2}',
    status: 409,
    code: 'id-conflict',
  },
  {
    rule: '5',
    name: 'a body id different from the target id, through the alias',
    path: '/users/ann',
    body: '{"name":"Bo","id":7}',
    status: 409,
    code: 'id-conflict',
  },
  {
    rule: '5',
    name: 'a body id different from the reserved target id',
    path: '/users/2',
    body: '{"name":"Bo","id":1}',
    status: 409,
    code: 'id-conflict',
  },
  {
    rule: '5',
    name: 'a body id on a create through a new alias (the server assigns the id)',
    path: '/users/fresh',
    body: '{"name":"Bo","id":1}',
    status: 409,
    code: 'id-conflict',
  },
  // Rule 6
  {
    rule: '6',
    name: 'If-Match that does not match',
    path: '/users/1',
    body: '{"name":"Bo"}',
    headers: () => ({ 'if-match': '"nope"' }),
    status: 412,
    code: 'precondition-failed',
  },
  {
    rule: '6',
    name: 'If-Match with the current ETag marked weak (strong comparison)',
    path: '/users/1',
    body: '{"name":"Bo"}',
    headers: (etag) => ({ 'if-match': `W/${etag}` }),
    status: 412,
    code: 'precondition-failed',
  },
  {
    rule: '6',
    name: 'If-Match on an alias that names nobody',
    path: '/users/fresh',
    body: '{"name":"Bo"}',
    headers: (etag) => ({ 'if-match': etag }),
    status: 412,
    code: 'precondition-failed',
  },
  {
    rule: '6',
    name: 'If-Match: * on an alias that names nobody',
    path: '/users/fresh',
    body: '{"name":"Bo"}',
    headers: () => ({ 'if-match': '*' }),
    status: 412,
    code: 'precondition-failed',
  },
  {
    rule: '6',
    name: 'If-Match on a reserved id that has no user yet',
    path: '/users/2',
    body: '{"name":"Bo"}',
    headers: (etag) => ({ 'if-match': etag }),
    status: 412,
    code: 'precondition-failed',
  },
  {
    rule: '6',
    name: 'If-None-Match: * on an existing user',
    path: '/users/1',
    body: '{"name":"Bo"}',
    headers: () => ({ 'if-none-match': '*' }),
    status: 412,
    code: 'precondition-failed',
  },
  {
    rule: '6',
    name: 'If-None-Match: * on an existing user through its alias',
    path: '/users/ann',
    body: '{"name":"Bo"}',
    headers: () => ({ 'if-none-match': '*' }),
    status: 412,
    code: 'precondition-failed',
  },
  {
    rule: '6',
    name: 'If-None-Match with the current ETag',
    path: '/users/1',
    body: '{"name":"Bo"}',
    headers: (etag) => ({ 'if-none-match': etag }),
    status: 412,
    code: 'precondition-failed',
  },
  {
    rule: '6',
    name: 'requireIfMatch and no If-Match on an existing user',
    path: '/users/1',
    body: '{"name":"Bo"}',
    status: 428,
    code: 'precondition-required',
    overrides: { requireIfMatch: true },
  },
  {
    rule: '6',
    name: 'requireIfMatch and no If-Match on an existing user through its alias',
    path: '/users/ann',
    body: '{"name":"Bo"}',
    status: 428,
    code: 'precondition-required',
    overrides: { requireIfMatch: true },
  },
  {
    rule: '6',
    name: 'requireIfMatch and a stale If-Match',
    path: '/users/1',
    body: '{"name":"Bo"}',
    headers: () => ({ 'if-match': '"stale"' }),
    status: 412,
    code: 'precondition-failed',
    overrides: { requireIfMatch: true },
  },
];

for (const c of refusals) {
  test(`PUT rule ${c.rule}: ${c.name} answers ${c.status} ${c.code}${c.field === undefined ? '' : ` naming field "${c.field}"`}, and (rule 8) changes nothing`, async (t) => {
    const server = await fixture(t, c.overrides);
    const before = await snapshot(server);
    const etag = await etagOf(server, '/users/1');
    const reply = await putRaw(
      server,
      c.path,
      c.body,
      c.contentType === undefined ? 'application/json' : c.contentType,
      c.headers?.(etag) ?? {},
    );
    const doc = assertProblem(reply, c.status, c.code);
    if (c.field !== undefined) assert.equal(doc.field, c.field, 'the problem names the field');
    if (c.code === 'invalid-user') assert.equal(typeof doc.field, 'string', 'a 422 names a field member');
    await assertUnchanged(server, before);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });
}

test('PUT rule 1: the depth limit counts the top-level object as level 1: 16 levels are accepted where 17 are refused', async (t) => {
  const server = await fixture(t);
  const accepted = await putRaw(server, '/users/1', tooDeep(16));
  assert.equal(accepted.status, 200, accepted.text);
  assert.equal((await get(server, '/users/1')).text, tooDeep(16).slice(0, -1) + ',"id":1}');
  const arrays = `{"name":"x","a":${'['.repeat(15)}${']'.repeat(15)}}`;
  const acceptedArrays = await putRaw(server, '/users/1', arrays);
  assert.equal(acceptedArrays.status, 200, acceptedArrays.text);
});

// ---------------------------------------------------------------- rule 1: accepted media types and boundaries

for (const contentType of [
  'application/json',
  'application/json; charset=utf-8',
  'application/json;charset="UTF-8"',
  'APPLICATION/JSON',
  'application/vnd.users+json',
  'application/merge-patch+json; charset=utf-8',
]) {
  test(`PUT rule 1: Content-Type ${contentType} is accepted`, async (t) => {
    const server = await fixture(t);
    const replaced = await putRaw(server, '/users/1', '{"name":"Bo"}', contentType);
    assert.equal(replaced.status, 200, replaced.text);
    assert.equal((await get(server, '/users/1')).text, '{"name":"Bo","id":1}');
    const created = await putRaw(server, '/users/fresh', '{"name":"Fresh"}', contentType);
    assert.equal(created.status, 201, created.text);
  });
}

const acceptedNames: Array<{ name: string; value: string }> = [
  { name: 'a name of 1 character', value: 'x' },
  { name: 'a name of exactly 200 characters', value: 'n'.repeat(200) },
  { name: 'a name of 200 characters outside the BMP (400 UTF-16 units)', value: '😀'.repeat(200) },
  { name: 'a name of 199 BMP characters and one outside it (201 UTF-16 units)', value: 'n'.repeat(199) + '😀' },
  { name: 'a name with non-ASCII letters and a space', value: 'Zoë Ångström' },
  { name: 'a name with punctuation and quotes', value: 'O\'Brien-Smith, Jr. "Bo" <b@x>' },
];

for (const c of acceptedNames) {
  test(`PUT rule 1: ${c.name} is accepted and stored as given`, async (t) => {
    const server = await fixture(t);
    const replaced = await put(server.url, '/users/1', { name: c.value });
    assert.equal(replaced.status, 200, replaced.text);
    assert.deepEqual((await get(server, '/users/1')).json(), { name: c.value, id: 1 });
  });
}

// ---------------------------------------------------------------- rule 2: replace

test('PUT rule 2: a PUT to an existing user by id replaces the whole representation (fields not sent are gone) and answers 200 with it', async (t) => {
  const server = await fixture(t);
  const replaced = await put(server.url, '/users/1', { name: 'Ann 2', role: 'ops' });
  assert.equal(replaced.status, 200, replaced.text);
  assert.match(String(replaced.headers['content-type']), /^application\/json/);
  assert.equal(replaced.headers['content-location'], '/users/1');
  assert.equal(replaced.text, '{"name":"Ann 2","role":"ops","id":1}');
  assert.equal((await get(server, '/users/1')).text, '{"name":"Ann 2","role":"ops","id":1}');
  assert.equal((await get(server, '/users/ann')).text, '{"name":"Ann 2","role":"ops","id":1}');
});

test('PUT rule 2: a PUT through the alias replaces the same user as a PUT by id', async (t) => {
  const server = await fixture(t);
  const replaced = await put(server.url, '/users/ann', { name: 'Ann 3' });
  assert.equal(replaced.status, 200, replaced.text);
  assert.equal(replaced.headers['content-location'], '/users/1');
  assert.equal(replaced.text, '{"name":"Ann 3","id":1}');
  assert.equal((await get(server, '/users/1')).text, '{"name":"Ann 3","id":1}');
  assert.equal(JSON.parse(await listText(server)).items.length, 1);
});

test('PUT rule 2: repeating the same PUT answers 200 with the same body each time and leaves the same state and ETag', async (t) => {
  const server = await fixture(t);
  const body = { name: 'Ann', team: { lead: false }, tags: ['a', 'b'] };
  const first = await put(server.url, '/users/1', body);
  assert.equal(first.status, 200);
  const list = await listText(server);
  const etag = await etagOf(server, '/users/1');
  for (const path of ['/users/1', '/users/ann', '/users/1']) {
    const again = await put(server.url, path, body);
    assert.equal(again.status, 200, `repeat on ${path}`);
    assert.equal(again.text, first.text, `repeat on ${path}: same body`);
    assert.equal(await listText(server), list);
    assert.equal(await etagOf(server, '/users/1'), etag);
  }
});

test('PUT rule 2: a replace with a different representation changes the ETag', async (t) => {
  const server = await fixture(t);
  const before = await etagOf(server, '/users/1');
  assert.equal((await put(server.url, '/users/1', { name: 'Other' })).status, 200);
  assert.notEqual(await etagOf(server, '/users/1'), before);
});

test('Users and references: unknown top-level fields are kept and GET returns the PUT payload as given, key order included, plus id', async (t) => {
  const server = await fixture(t);
  const body =
    '{"zeta":1,"name":"Kim","nested":{"deep":{"list":[1,"two",null,true,{"k":[]}]}},"empty":{},"nothing":null,"flag":false,"text":"é \\"q\\" ☃","alpha":"a"}';
  const replaced = await putRaw(server, '/users/1', body);
  assert.equal(replaced.status, 200, replaced.text);
  const expected = JSON.stringify({ ...JSON.parse(body), id: 1 });
  assert.equal(replaced.text, expected);
  const read = await get(server, '/users/1');
  assert.equal(read.text, expected);
  assert.deepEqual(Object.keys(read.json()), [
    'zeta',
    'name',
    'nested',
    'empty',
    'nothing',
    'flag',
    'text',
    'alpha',
    'id',
  ]);
  const created = await putRaw(server, '/users/fresh', body);
  assert.equal(created.status, 201);
  assert.equal((await get(server, '/users/fresh')).text, JSON.stringify({ ...JSON.parse(body), id: 4 }));
});

test('Users and references: an id the body carries keeps its place in the representation', async (t) => {
  const server = await fixture(t);
  const replaced = await putRaw(server, '/users/1', '{"id":1,"name":"First"}');
  assert.equal(replaced.status, 200, replaced.text);
  assert.equal((await get(server, '/users/1')).text, '{"id":1,"name":"First"}');
});

// ---------------------------------------------------------------- rule 3: create through an alias

test('PUT rule 3: a PUT to an alias that names nobody creates a user with a fresh id: 201, Location /users/{id}, the representation', async (t) => {
  const server = await fixture(t);
  const created = await put(server.url, '/users/fresh', { name: 'Fresh', x: [1] });
  assert.equal(created.status, 201, created.text);
  assert.equal(created.headers.location, '/users/4');
  assert.equal(created.headers['content-location'], '/users/4');
  assert.match(String(created.headers['content-type']), /^application\/json/);
  assert.equal(created.text, '{"name":"Fresh","x":[1],"id":4}');
  const byAlias = await get(server, '/users/fresh');
  assert.equal(byAlias.text, created.text);
  assert.equal(byAlias.headers['content-location'], '/users/4');
  assert.equal((await get(server, '/users/4')).text, created.text);
  // The alias is bound: the next PUT through it replaces.
  const again = await put(server.url, '/users/fresh', { name: 'Fresh', x: [1] });
  assert.equal(again.status, 200);
  assert.equal(again.text, created.text);
  assert.equal(JSON.parse(await listText(server)).items.length, 2);
});

// ---------------------------------------------------------------- rule 4: create under a reservation

test('PUT rule 4: a PUT to an id with a live reservation creates the user under it: 201, Location, the representation', async (t) => {
  const server = await startTestServer(t);
  const reserved = await send(server.url, 'POST', '/reservations');
  assert.equal(reserved.status, 201);
  const { id } = reserved.json() as { id: number };
  assert.equal(reserved.headers.location, `/users/${id}`);
  const created = await put(server.url, `/users/${id}`, { name: 'Res' });
  assert.equal(created.status, 201, created.text);
  assert.equal(created.headers.location, `/users/${id}`);
  assert.equal(created.text, `{"name":"Res","id":${id}}`);
  assert.equal((await get(server, `/users/${id}`)).text, created.text);
  // The reservation is used up: the id now names a user, so a PUT replaces.
  const again = await put(server.url, `/users/${id}`, { name: 'Res 2' });
  assert.equal(again.status, 200);
});

test('PUT rule 4: a reservation is used up by its create: with maxReservations 1 a new reservation is possible again afterwards', async (t) => {
  const server = await startTestServer(t, { maxReservations: 1 });
  assert.equal((await send(server.url, 'POST', '/reservations')).status, 201);
  assert.equal((await send(server.url, 'POST', '/reservations')).status, 503);
  assert.equal((await put(server.url, '/users/1', { name: 'R' })).status, 201);
  const next = await send(server.url, 'POST', '/reservations');
  assert.equal(next.status, 201, next.text);
  assert.equal(next.headers.location, '/users/2');
});

test('PUT rule 4: a PUT to an id whose reservation expired answers 410 gone and creates nothing (injected clock)', async (t) => {
  let now = T0;
  const server = await startTestServer(t, { reservationTtl: 5 }, { clock: () => now });
  const early = await send(server.url, 'POST', '/reservations');
  const late = await send(server.url, 'POST', '/reservations');
  assert.equal(early.headers.location, '/users/1');
  assert.equal(late.headers.location, '/users/2');
  now = T0 + 5_000 - 1;
  assert.equal((await put(server.url, '/users/1', { name: 'just in time' })).status, 201, 'live until its expiresAt');
  now = T0 + 5_000;
  assertProblem(await put(server.url, '/users/2', { name: 'too late' }), 410, 'gone');
  assertProblem(await get(server, '/users/2'), 404, 'not-found');
  assert.equal(await listText(server), '{"items":[{"name":"just in time","id":1}],"next":null}');
  // The expired id is not reissued.
  assert.equal((await send(server.url, 'POST', '/users/new', { json: { name: 'n' } })).headers.location, '/users/3');
});

test('PUT rule 4: a PUT to an id whose reservation expired answers 410 gone (reservationTtl 1, a second later)', async (t) => {
  let now = Date.UTC(2026, 0, 1);
  const server = await startTestServer(t, { reservationTtl: 1 }, { clock: () => now });
  const reserved = await send(server.url, 'POST', '/reservations');
  assert.equal(reserved.status, 201);
  now += 1000;
  assertProblem(await put(server.url, reserved.headers.location as string, { name: 'late' }), 410, 'gone');
  assert.equal(await listText(server), '{"items":[],"next":null}');
});

test('PUT rule 4: a PUT to the id of a deleted user answers 410 gone: ids are never reused', async (t) => {
  const server = await startTestServer(t);
  assert.equal((await put(server.url, '/users/bob', { name: 'Bob' })).headers.location, '/users/1');
  assert.equal((await send(server.url, 'DELETE', '/users/1')).status, 204);
  assertProblem(await put(server.url, '/users/1', { name: 'Bob again' }), 410, 'gone');
  assertProblem(await get(server, '/users/1'), 404, 'not-found');
});

test('PUT rule 4: a PUT to an id never issued answers 404 not-found and does not issue it', async (t) => {
  const server = await startTestServer(t);
  assertProblem(await put(server.url, '/users/1', { name: 'Early' }), 404, 'not-found');
  assertProblem(await put(server.url, '/users/77', { name: 'Far' }), 404, 'not-found');
  const created = await send(server.url, 'POST', '/users/new', { json: { name: 'First' } });
  assert.equal(created.headers.location, '/users/1', 'the refused PUTs issued no id');
});

// ---------------------------------------------------------------- rule 5: id in the body

test('PUT rule 5: an id in the body equal to the target id is accepted, by id and through the alias', async (t) => {
  const server = await fixture(t);
  const byId = await put(server.url, '/users/1', { name: 'Same', id: 1 });
  assert.equal(byId.status, 200, byId.text);
  assert.equal(byId.text, '{"name":"Same","id":1}');
  const byAlias = await put(server.url, '/users/ann', { name: 'Same 2', id: 1 });
  assert.equal(byAlias.status, 200, byAlias.text);
  assert.equal((await get(server, '/users/1')).text, '{"name":"Same 2","id":1}');
});

test('PUT rule 5: an id in the body equal to the reserved target id is accepted on create (201)', async (t) => {
  const server = await fixture(t);
  const created = await put(server.url, '/users/2', { name: 'Res', id: 2 });
  assert.equal(created.status, 201, created.text);
  assert.equal(created.headers.location, '/users/2');
  assert.equal((await get(server, '/users/2')).text, '{"name":"Res","id":2}');
});

// ---------------------------------------------------------------- rule 6: preconditions

test('PUT rule 6: If-Match with the current ETag (alone, in a list, or *) lets the replace through', async (t) => {
  const server = await fixture(t);
  let etag = await etagOf(server, '/users/1');
  const exact = await put(server.url, '/users/1', { name: 'M1' }, { 'if-match': etag });
  assert.equal(exact.status, 200, exact.text);
  etag = await etagOf(server, '/users/1');
  const listed = await put(server.url, '/users/ann', { name: 'M2' }, { 'if-match': `"other", ${etag}` });
  assert.equal(listed.status, 200, listed.text);
  const star = await put(server.url, '/users/1', { name: 'M3' }, { 'if-match': '*' });
  assert.equal(star.status, 200, star.text);
  assert.equal((await get(server, '/users/1')).text, '{"name":"M3","id":1}');
});

test('PUT rule 6: an ETag from before a change no longer matches (lost-update protection)', async (t) => {
  const server = await fixture(t);
  const etag = await etagOf(server, '/users/1');
  assert.equal((await put(server.url, '/users/1', { name: 'Writer A' }, { 'if-match': etag })).status, 200);
  assertProblem(
    await put(server.url, '/users/1', { name: 'Writer B' }, { 'if-match': etag }),
    412,
    'precondition-failed',
  );
  assert.equal((await get(server, '/users/1')).text, '{"name":"Writer A","id":1}');
});

test('PUT rule 6: If-None-Match: * on a new alias creates (201), and a repeat of it then answers 412', async (t) => {
  const server = await fixture(t);
  const created = await put(server.url, '/users/fresh', { name: 'Once' }, { 'if-none-match': '*' });
  assert.equal(created.status, 201, created.text);
  assert.equal(created.headers.location, '/users/4');
  assertProblem(
    await put(server.url, '/users/fresh', { name: 'Twice' }, { 'if-none-match': '*' }),
    412,
    'precondition-failed',
  );
  assert.equal((await get(server, '/users/fresh')).text, '{"name":"Once","id":4}');
});

test('PUT rule 6: If-None-Match: * on a reserved id creates (201)', async (t) => {
  const server = await fixture(t);
  const created = await put(server.url, '/users/2', { name: 'Res' }, { 'if-none-match': '*' });
  assert.equal(created.status, 201, created.text);
});

test('PUT rule 6: with requireIfMatch a PUT or DELETE of an existing user without If-Match answers 428 and changes nothing; with If-Match both succeed', async (t) => {
  const server = await fixture(t, { requireIfMatch: true });
  const before = await snapshot(server);
  assertProblem(await put(server.url, '/users/1', { name: 'No' }), 428, 'precondition-required', 'PUT');
  assertProblem(await send(server.url, 'DELETE', '/users/1'), 428, 'precondition-required', 'DELETE');
  assertProblem(await send(server.url, 'DELETE', '/users/ann'), 428, 'precondition-required', 'DELETE by alias');
  assert.deepEqual(await snapshot(server), before);
  const etag = await etagOf(server, '/users/1');
  const replaced = await put(server.url, '/users/1', { name: 'Yes' }, { 'if-match': etag });
  assert.equal(replaced.status, 200, replaced.text);
  const deleted = await send(server.url, 'DELETE', '/users/1', {
    headers: { 'if-match': await etagOf(server, '/users/1') },
  });
  assert.equal(deleted.status, 204);
  assertProblem(await get(server, '/users/1'), 404, 'not-found');
});

test('PUT rule 6: with requireIfMatch a create needs no If-Match: through a new alias (201) and under a reservation (201)', async (t) => {
  const server = await fixture(t, { requireIfMatch: true });
  const viaAlias = await put(server.url, '/users/fresh', { name: 'A' });
  assert.equal(viaAlias.status, 201, viaAlias.text);
  assert.equal(viaAlias.headers.location, '/users/4');
  const viaReservation = await put(server.url, '/users/2', { name: 'R' });
  assert.equal(viaReservation.status, 201, viaReservation.text);
  // A second PUT through the alias is a replace: now If-Match is required.
  assertProblem(await put(server.url, '/users/fresh', { name: 'A2' }), 428, 'precondition-required');
});

test('PUT rule 6: a DELETE with an If-Match that does not match answers 412 and keeps the user', async (t) => {
  const server = await fixture(t);
  const before = await snapshot(server);
  assertProblem(
    await send(server.url, 'DELETE', '/users/1', { headers: { 'if-match': '"nope"' } }),
    412,
    'precondition-failed',
  );
  assert.deepEqual(await snapshot(server), before);
});

// ---------------------------------------------------------------- rule 7: ETag on a PUT response

const etagCases: Array<{
  name: string;
  path: string;
  body: (id: number) => string;
  status: number;
  withEtag: boolean;
}> = [
  {
    name: 'a replace whose body is byte-identical to the stored representation ({"name":"a","id":1})',
    path: '/users/1',
    body: () => '{"name":"a","id":1}',
    status: 200,
    withEtag: true,
  },
  {
    name: 'a replace whose body carries id first, byte-identical ({"id":1,"name":"a"})',
    path: '/users/1',
    body: () => '{"id":1,"name":"a"}',
    status: 200,
    withEtag: true,
  },
  {
    name: 'a replace through the alias whose body is byte-identical',
    path: '/users/ann',
    body: () => '{"name":"a","x":[1,{"y":null}],"id":1}',
    status: 200,
    withEtag: true,
  },
  {
    name: 'a create under a reservation whose body carries the reserved id',
    path: '/users/2',
    body: () => '{"name":"r","id":2}',
    status: 201,
    withEtag: true,
  },
  {
    name: 'a replace without id in the body (the server added it)',
    path: '/users/1',
    body: () => '{"name":"a"}',
    status: 200,
    withEtag: false,
  },
  {
    name: 'a replace with the matching id but extra whitespace',
    path: '/users/1',
    body: () => '{"name": "a", "id": 1}',
    status: 200,
    withEtag: false,
  },
  {
    name: 'a replace with the matching id and a trailing newline',
    path: '/users/1',
    body: () => '{"name":"a","id":1}\n',
    status: 200,
    withEtag: false,
  },
  {
    name: 'a replace with the matching id and an escaped character the server stores unescaped',
    path: '/users/1',
    body: () => '{"name":"\\u0061","id":1}',
    status: 200,
    withEtag: false,
  },
  {
    name: 'a create through an alias (the id is new)',
    path: '/users/fresh',
    body: () => '{"name":"f"}',
    status: 201,
    withEtag: false,
  },
  {
    name: 'a create under a reservation without id in the body',
    path: '/users/2',
    body: () => '{"name":"r"}',
    status: 201,
    withEtag: false,
  },
];

for (const c of etagCases) {
  test(`PUT rule 7: ${c.name} answers ${c.status} ${c.withEtag ? 'with the strong ETag that GET then gives' : 'without an ETag'}`, async (t) => {
    const server = await fixture(t);
    const reply = await putRaw(server, c.path, c.body(0));
    assert.equal(reply.status, c.status, reply.text);
    const location =
      c.status === 201 ? (reply.headers.location as string) : (reply.headers['content-location'] as string);
    const read = await get(server, location);
    assert.equal(read.status, 200);
    assert.equal(reply.text, read.text);
    if (c.withEtag) {
      assert.equal(read.text, c.body(0), 'the stored representation is the request content');
      assert.equal(reply.headers.etag, read.headers.etag);
      assert.match(String(reply.headers.etag), /^"[^"]*"$/, 'a strong entity tag');
    } else {
      assert.notEqual(read.text, c.body(0));
      assert.equal(reply.headers.etag, undefined);
    }
  });
}

// ---------------------------------------------------------------- Prefer: return=minimal

test('PUT Prefer: return=minimal on a replace answers 204 with no body and Preference-Applied: return=minimal, and the replace happened', async (t) => {
  const server = await fixture(t);
  const reply = await put(server.url, '/users/1', { name: 'Min' }, { prefer: 'return=minimal' });
  assert.equal(reply.status, 204);
  assert.equal(reply.text, '');
  assert.equal(reply.headers['preference-applied'], 'return=minimal');
  assert.equal((await get(server, '/users/1')).text, '{"name":"Min","id":1}');
});

test('PUT Prefer: return=minimal on a create through an alias answers 204, keeps Location and creates the user', async (t) => {
  const server = await fixture(t);
  const reply = await put(server.url, '/users/fresh', { name: 'Min' }, { prefer: 'return=minimal' });
  assert.equal(reply.status, 204);
  assert.equal(reply.text, '');
  assert.equal(reply.headers['preference-applied'], 'return=minimal');
  assert.equal(reply.headers.location, '/users/4');
  assert.equal((await get(server, '/users/4')).text, '{"name":"Min","id":4}');
});

test('PUT Prefer: return=minimal on a create under a reservation answers 204 and keeps Location', async (t) => {
  const server = await fixture(t);
  const reply = await put(server.url, '/users/2', { name: 'Min' }, { prefer: 'return=minimal' });
  assert.equal(reply.status, 204);
  assert.equal(reply.text, '');
  assert.equal(reply.headers['preference-applied'], 'return=minimal');
  assert.equal(reply.headers.location, '/users/2');
});

test('PUT Prefer: return=minimal among other preferences is still applied', async (t) => {
  const server = await fixture(t);
  const reply = await put(server.url, '/users/1', { name: 'Min' }, { prefer: 'respond-async, return=minimal' });
  assert.equal(reply.status, 204);
  assert.equal(reply.headers['preference-applied'], 'return=minimal');
});

test('PUT Prefer: return=representation answers the usual 200 with the representation and no Preference-Applied: return=minimal', async (t) => {
  const server = await fixture(t);
  const reply = await put(server.url, '/users/1', { name: 'Full' }, { prefer: 'return=representation' });
  assert.equal(reply.status, 200);
  assert.equal(reply.text, '{"name":"Full","id":1}');
  assert.notEqual(reply.headers['preference-applied'], 'return=minimal');
});

test('PUT Prefer: return=minimal does not turn a refusal into a 204: a bad body still answers 422 and changes nothing', async (t) => {
  const server = await fixture(t);
  const before = await snapshot(server);
  assertProblem(await put(server.url, '/users/1', { nick: 'x' }, { prefer: 'return=minimal' }), 422, 'invalid-user');
  await assertUnchanged(server, before);
});
