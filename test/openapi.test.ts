/**
 * GET /openapi.json (API.md "Endpoints"): an OpenAPI 3.1 document that a
 * real validator accepts, whose paths and methods are exactly the server's
 * route table, that names every problem type of shared/problems.ts, and
 * that describes the headers every response carries.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { problems, problemType } from '../shared/problems.js';
import { buildOpenApi, openApiPath } from '../server/http/openapi.js';
import type { Route } from '../server/http/route.js';
import { send, startTestServer } from './helpers.js';

// The document is free-form JSON, walked by path: its values are what the assertions check.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>;

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

async function fetchDocument(t: Parameters<typeof startTestServer>[0]) {
  const server = await startTestServer(t);
  const reply = await send(server.url, 'GET', '/openapi.json');
  assert.equal(reply.status, 200);
  return { server, reply, doc: reply.json() as Json };
}

/** Every operation of the document, with its path and method. */
function operations(doc: Json): { path: string; method: string; op: Json }[] {
  const out: { path: string; method: string; op: Json }[] = [];
  for (const [path, item] of Object.entries(doc.paths as Json)) {
    for (const [method, op] of Object.entries(item as Json))
      if (METHODS.includes(method)) out.push({ path, method, op: op as Json });
  }
  return out;
}

/** Follows a local $ref. */
function resolve(doc: Json, node: Json): Json {
  if (typeof node.$ref !== 'string') return node;
  const parts = (node.$ref as string).replace(/^#\//, '').split('/');
  let target: Json | undefined = doc;
  for (const part of parts) target = target?.[part];
  assert.ok(target !== undefined, `unresolved ${node.$ref}`);
  return target as Json;
}

test('GET /openapi.json is an OpenAPI 3.1.0 document that @seriousme/openapi-schema-validator accepts, with every $ref resolved', async (t) => {
  const { doc } = await fetchDocument(t);
  assert.equal(doc.openapi, '3.1.0');
  const validator = new Validator();
  const result = await validator.validate(doc);
  assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
  assert.doesNotThrow(() => validator.resolveRefs());
});

test('the validator used here refuses a broken document and a dangling $ref, so the test above can fail', async () => {
  const minimal = (paths: Json): Json => ({ openapi: '3.1.0', info: { title: 't', version: '1' }, paths });
  assert.equal(
    (await new Validator().validate(minimal({ '/x': { get: { responses: { '200': { description: 'ok' } } } } }))).valid,
    true,
  );
  assert.equal(
    (await new Validator().validate(minimal({ '/x': { get: { responses: { '200': { content: 'nope' } } } } }))).valid,
    false,
  );
  assert.equal(
    (
      await new Validator().validate(
        minimal({ '/x': { get: { responses: { '200': { $ref: '#/components/responses/Nope' } } } } }),
      )
    ).valid,
    false,
  );
});

test('the paths and methods of /openapi.json are exactly the route table (":ref" written "{ref}")', async (t) => {
  const { server, doc } = await fetchDocument(t);
  const documented = operations(doc)
    .map(({ path, method }) => `${method.toUpperCase()} ${path}`)
    .sort();
  const routed = server.running.app.routes.map((r) => `${r.method} ${r.path.replace(/:(\w+)/g, '{$1}')}`).sort();
  assert.deepEqual(documented, routed);
  for (const expected of [
    'GET /',
    'POST /login',
    'POST /logout',
    'GET /users',
    'POST /users/new',
    'GET /users/{ref}',
    'PUT /users/{ref}',
    'DELETE /users/{ref}',
    'POST /reservations',
    'GET /healthz',
    'GET /metrics',
    'GET /openapi.json',
  ]) {
    assert.ok(documented.includes(expected), `${expected} is documented`);
  }
});

test('the document served is the one the app built at start', async (t) => {
  const { server, doc } = await fetchDocument(t);
  assert.deepEqual(doc, server.running.app.openapi);
});

test('each operation of the document is the description written beside its route, and operationIds are unique', async (t) => {
  const { server, doc } = await fetchDocument(t);
  const routes: readonly Route[] = server.running.app.routes;
  for (const route of routes) {
    assert.equal(
      doc.paths[openApiPath(route.path)][route.method.toLowerCase()].operationId,
      route.doc.operationId,
      `${route.method} ${route.path}`,
    );
  }
  const ids = routes.map((r) => r.doc.operationId);
  assert.equal(new Set(ids).size, ids.length, `duplicate operationIds: ${ids.join(', ')}`);
  assert.deepEqual(buildOpenApi(routes), doc);
});

for (const kind of Object.values(problems)) {
  test(`the Problem schema lists the problem type ${kind.code} with its status and title, and the ${kind.status} responses name it`, async (t) => {
    const { doc } = await fetchDocument(t);
    const listed = doc.components.schemas.Problem['x-problem-types'] as {
      type: string;
      status: number;
      title: string;
    }[];
    assert.deepEqual(
      listed.find((p) => p.type === problemType(kind)),
      { type: problemType(kind), status: kind.status, title: kind.title },
    );
    // 405 is the router's answer to a method no operation has: the introduction describes it.
    if (kind.status === 405) {
      assert.match(doc.info.description, /405 with `Allow`/);
      return;
    }
    const response = doc.components.responses[`Problem${kind.status}`] as Json | undefined;
    assert.ok(response !== undefined, `no Problem${kind.status} response`);
    assert.ok(
      String(response.description).includes(`\`${kind.code}\``),
      `Problem${kind.status} names ${kind.code}: ${response.description}`,
    );
    const answering = operations(doc).filter(
      ({ op }) => op.responses[String(kind.status)]?.$ref === `#/components/responses/Problem${kind.status}`,
    );
    assert.ok(answering.length > 0, `no operation answers ${kind.status}`);
  });
}

test('every response of every operation declares the X-Request-Id header', async (t) => {
  const { doc } = await fetchDocument(t);
  for (const { path, method, op } of operations(doc)) {
    for (const [status, response] of Object.entries(op.responses as Json)) {
      const headers = resolve(doc, response as Json).headers as Json | undefined;
      assert.ok(headers?.['X-Request-Id'] !== undefined, `${method} ${path} ${status}`);
    }
  }
});

test('every operation can answer 429 with Retry-After, RateLimit-Policy and RateLimit, and 500, as problem documents', async (t) => {
  const { doc } = await fetchDocument(t);
  for (const { path, method, op } of operations(doc)) {
    for (const status of ['429', '500']) {
      const response = resolve(doc, op.responses[status] ?? {});
      assert.ok(response.content?.['application/problem+json'] !== undefined, `${method} ${path} ${status}`);
      assert.equal(resolve(doc, response.content['application/problem+json'].schema).title ?? 'Problem', 'Problem');
    }
    const headers = Object.keys(resolve(doc, op.responses['429']).headers as Json);
    for (const name of ['Retry-After', 'RateLimit-Policy', 'RateLimit'])
      assert.ok(headers.includes(name), `${method} ${path} 429 ${name}`);
  }
});

const headerCases: { op: string; status: string; headers: string[] }[] = [
  { op: 'get /users/{ref}', status: '200', headers: ['ETag', 'Content-Location'] },
  { op: 'put /users/{ref}', status: '201', headers: ['Location', 'Content-Location'] },
  { op: 'put /users/{ref}', status: '204', headers: ['Preference-Applied'] },
  { op: 'post /users/new', status: '201', headers: ['Location', 'Idempotent-Replayed'] },
  { op: 'post /reservations', status: '503', headers: ['Retry-After'] },
  { op: 'post /login', status: '200', headers: ['Set-Cookie'] },
  { op: 'post /login', status: '401', headers: ['WWW-Authenticate'] },
  { op: 'get /', status: '401', headers: ['WWW-Authenticate'] },
  { op: 'post /logout', status: '204', headers: ['Set-Cookie'] },
  { op: 'get /users', status: '401', headers: ['WWW-Authenticate'] },
];
for (const c of headerCases) {
  test(`the ${c.status} of ${c.op.toUpperCase()} declares ${c.headers.join(', ')}`, async (t) => {
    const { doc } = await fetchDocument(t);
    const [method, path] = c.op.split(' ');
    const response = resolve(doc, doc.paths[path!][method!].responses[c.status]);
    for (const name of c.headers) assert.ok(response.headers?.[name] !== undefined, name);
  });
}

test('the session cookie and API tokens are security schemes, the /users operations and /metrics accept either or nothing (per --require-session), /tokens needs one', async (t) => {
  const { doc } = await fetchDocument(t);
  assert.deepEqual(doc.components.securitySchemes.session, {
    ...doc.components.securitySchemes.session,
    type: 'apiKey',
    in: 'cookie',
    name: 'USER_TOKEN',
  });
  assert.deepEqual(doc.components.securitySchemes.bearer, {
    ...doc.components.securitySchemes.bearer,
    type: 'http',
    scheme: 'bearer',
  });
  assert.deepEqual(doc.paths['/users/{ref}'].put.security, [{}, { session: [] }, { bearer: [] }]);
  assert.deepEqual(doc.paths['/metrics'].get.security, [{}, { session: [] }, { bearer: [] }]);
  for (const method of ['get', 'post'])
    assert.deepEqual(doc.paths['/tokens'][method].security, [{ session: [] }, { bearer: [] }]);
  assert.deepEqual(doc.paths['/tokens/{id}'].delete.security, [{ session: [] }, { bearer: [] }]);
  assert.deepEqual(doc.paths['/login'].post.security, [{ basic: [] }]);
  assert.deepEqual(doc.paths['/healthz'].get.security, []);
});

test('GET /openapi.json carries a strong ETag and Cache-Control: no-cache; If-None-Match with it answers 304 without a body', async (t) => {
  const { server, reply } = await fetchDocument(t);
  assert.equal(reply.headers['content-type'], 'application/json');
  assert.equal(reply.headers['cache-control'], 'no-cache');
  const etag = reply.headers.etag as string;
  assert.match(etag, /^"[A-Za-z0-9_-]+"$/);
  const again = await send(server.url, 'GET', '/openapi.json', { headers: { 'if-none-match': etag } });
  assert.equal(again.status, 304);
  assert.equal(again.text, '');
  assert.equal(again.headers.etag, etag);
  const head = await send(server.url, 'HEAD', '/openapi.json');
  assert.equal(head.status, 200);
  assert.equal(head.text, '');
  assert.equal(head.headers.etag, etag);
});

test('GET /openapi.json needs no session, even under --require-session all', async (t) => {
  const server = await startTestServer(t, { requireSession: 'all' });
  assert.equal((await send(server.url, 'GET', '/openapi.json')).status, 200);
});

const pathCases: [string, string][] = [
  ['/users/:ref', '/users/{ref}'],
  ['/users', '/users'],
  ['/a/:x/b/:y', '/a/{x}/b/{y}'],
];
for (const [route, path] of pathCases) {
  test(`openApiPath writes the route ${route} as ${path}`, () => assert.equal(openApiPath(route), path));
}

/** Asserts that the document describes `reply` for this operation: its status, with its media type. */
function assertDescribed(
  doc: Json,
  method: string,
  path: string,
  reply: { status: number; headers: Record<string, unknown> },
): void {
  const op = ((doc.paths as Json)[path] as Json)[method] as Json;
  const response = (op.responses as Json)[String(reply.status)] as Json | undefined;
  assert.ok(response !== undefined, `${method.toUpperCase()} ${path} does not describe ${reply.status}`);
  const content = resolve(doc, response).content as Json | undefined;
  const type = String(reply.headers['content-type']).split(';')[0]!;
  assert.ok(
    content !== undefined && type in content,
    `${method.toUpperCase()} ${path} ${reply.status}: ${type} is not among ${Object.keys(content ?? {}).join(', ')}`,
  );
}

test('with --login-page, the HTML answers of POST /login (401, 403, 429) and POST /logout (403) and the problem answers of the same statuses are in the document', async (t) => {
  const server = await startTestServer(t, { loginPage: true });
  const doc = (await send(server.url, 'GET', '/openapi.json')).json() as Json;
  const form = (fields: Record<string, string>, headers: Record<string, string> = {}) =>
    send(server.url, 'POST', '/login', {
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: server.url, ...headers },
      body: new URLSearchParams(fields).toString(),
    });
  const page = await send(server.url, 'GET', '/login');
  const csrf = /name="csrf" value="([^"]*)"/.exec(page.text)![1]!;
  const formCookie = String(page.headers['set-cookie']).split(';')[0]!;
  const answers: [string, string, Awaited<ReturnType<typeof send>>][] = [];
  answers.push(['post', '/login', await form({ csrf, username: 'admin', password: 'wrong' }, { cookie: formCookie })]);
  answers.push([
    'post',
    '/login',
    await form({ csrf: 'forged', username: 'admin', password: 'wrong' }, { cookie: formCookie }),
  ]);
  let limited;
  for (let i = 0; i < 11; i++)
    limited = await form({ csrf, username: 'rita', password: 'wrong' }, { cookie: formCookie });
  answers.push(['post', '/login', limited!]);
  answers.push([
    'post',
    '/login',
    await send(server.url, 'POST', '/login', {
      headers: { authorization: 'Basic ' + Buffer.from('admin:wrong').toString('base64') },
    }),
  ]);
  const cookie = await server.login();
  answers.push([
    'post',
    '/logout',
    await send(server.url, 'POST', '/logout', {
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example', cookie },
      body: 'csrf=x',
    }),
  ]);
  answers.push([
    'post',
    '/logout',
    await send(server.url, 'POST', '/logout', { headers: { origin: 'https://evil.example', cookie } }),
  ]);
  const seen = answers.map(([, , reply]) => `${reply.status} ${String(reply.headers['content-type']).split(';')[0]}`);
  assert.deepEqual(seen, [
    '401 text/html',
    '403 text/html',
    '429 text/html',
    '401 application/problem+json',
    '403 text/html',
    '403 application/problem+json',
  ]);
  for (const [method, path, reply] of answers) assertDescribed(doc, method, path, reply);
});
