/**
 * Model-based test (issue 6): random sequences of PUT (by id and by alias),
 * moves (`--allow-id-change`), DELETE, POST /reservations, POST /users/new,
 * GET, the passing of time and restarts are run against the real server
 * (journal store, injected clock) and against a small model of API.md kept
 * in this file. Every answer is compared (status, body, Location,
 * Content-Location, problem type), and at the end the listing, before and
 * after one more restart.
 *
 * The model follows API.md, not the server's code: ids are issued in turn
 * from 1 and never reused; a move takes an id never issued, which the turn
 * then passes over; an old id answers 301 to the current one; an alias
 * follows its user and is released by DELETE; a reservation lives
 * --reservation-ttl seconds; a restart loses nothing.
 *
 * fast-check generates the sequences and shrinks a failing one; the seed is
 * printed with it.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import fc from 'fast-check';
import { parseConfig } from '../server/ops/config.js';
import { startServer, type RunningServer } from '../server/commands/serve.js';
import { PROBLEM_TYPE_PREFIX } from '../shared/problems.js';
import { ADMIN_PASSWORD, send, tempDir, TEST_DEFAULTS, type Reply } from './helpers.js';

const TTL_SECONDS = 300;
const ALIASES = ['ann', 'ben', 'cyd', 'dee'];
const NAMES = ['Ann', 'Ben', 'Cyd', 'Dee'];

// ---------------------------------------------------------------- the model

interface Expected {
  status: number;
  /** The body, or '' for none; undefined for a problem document (then `problem` is its code). */
  body?: string;
  problem?: string;
  location?: string;
  contentLocation?: string;
}

class Model {
  readonly users = new Map<number, { json: string; alias: string | undefined }>();
  readonly aliases = new Map<string, number>();
  /** Old id -> the current id of the user that moved away from it. */
  readonly moved = new Map<number, number>();
  readonly issued = new Set<number>();
  /** The last id issued in turn. */
  turn = 0;
  readonly reservations = new Map<number, number>();

  constructor(public now: number) {}

  nextId(): number {
    let id = this.turn + 1;
    while (this.issued.has(id)) id++;
    return id;
  }

  issue(id: number): void {
    if (id === this.nextId()) this.turn = id;
    this.issued.add(id);
  }

  isLive(id: number): boolean {
    const expiresAt = this.reservations.get(id);
    return expiresAt !== undefined && expiresAt > this.now;
  }

  /** The id a ref names, if a user holds it now. */
  private resolve(ref: Ref): number | undefined {
    const id = ref.kind === 'alias' ? this.aliases.get(ref.alias) : ref.id;
    return id !== undefined && this.users.has(id) ? id : undefined;
  }

  put(ref: Ref, body: Record<string, unknown>): Expected {
    if (ref.kind === 'id' && this.moved.has(ref.id))
      return { status: 301, body: '', location: `/users/${this.moved.get(ref.id)}` };
    const bodyId = body.id as number | undefined;
    const current = this.resolve(ref);
    if (current !== undefined) {
      if (bodyId !== undefined && bodyId !== current) {
        if (this.issued.has(bodyId)) return { status: 409, problem: 'id-conflict' };
        const json = represent(body, bodyId);
        this.move(current, bodyId, json);
        return { status: 200, body: json, location: `/users/${bodyId}`, contentLocation: `/users/${bodyId}` };
      }
      const json = represent(body, current);
      this.users.set(current, { json, alias: this.users.get(current)!.alias });
      return { status: 200, body: json, contentLocation: `/users/${current}` };
    }
    let id: number;
    if (ref.kind === 'alias') {
      id = this.nextId();
      if (bodyId !== undefined && bodyId !== id) {
        if (this.issued.has(bodyId)) return { status: 409, problem: 'id-conflict' };
        id = bodyId;
      }
    } else {
      id = ref.id;
      if (!this.isLive(id))
        return this.issued.has(id) ? { status: 410, problem: 'gone' } : { status: 404, problem: 'not-found' };
      if (bodyId !== undefined && bodyId !== id) return { status: 409, problem: 'id-conflict' };
    }
    const json = represent(body, id);
    const alias = ref.kind === 'alias' ? ref.alias : undefined;
    this.users.set(id, { json, alias });
    if (alias !== undefined) this.aliases.set(alias, id);
    this.reservations.delete(id);
    this.issue(id);
    return { status: 201, body: json, location: `/users/${id}`, contentLocation: `/users/${id}` };
  }

  private move(from: number, to: number, json: string): void {
    const user = this.users.get(from)!;
    this.users.delete(from);
    this.users.set(to, { json, alias: user.alias });
    if (user.alias !== undefined) this.aliases.set(user.alias, to);
    for (const [old, current] of this.moved) if (current === from) this.moved.set(old, to);
    this.moved.set(from, to);
    this.issue(to);
  }

  delete(ref: Ref): Expected {
    if (ref.kind === 'id' && this.moved.has(ref.id))
      return { status: 301, body: '', location: `/users/${this.moved.get(ref.id)}` };
    const id = this.resolve(ref);
    if (id === undefined) return { status: 404, problem: 'not-found' };
    const { alias } = this.users.get(id)!;
    this.users.delete(id);
    if (alias !== undefined) this.aliases.delete(alias);
    return { status: 204, body: '' };
  }

  get(ref: Ref): Expected {
    if (ref.kind === 'id' && this.moved.has(ref.id))
      return { status: 301, body: '', location: `/users/${this.moved.get(ref.id)}` };
    const id = this.resolve(ref);
    if (id === undefined) return { status: 404, problem: 'not-found' };
    return {
      status: 200,
      body: this.users.get(id)!.json,
      ...(ref.kind === 'alias' && { contentLocation: `/users/${id}` }),
    };
  }

  reserve(): Expected {
    const id = this.nextId();
    const expiresAt = this.now + TTL_SECONDS * 1000;
    this.reservations.set(id, expiresAt);
    this.issue(id);
    return {
      status: 201,
      body: JSON.stringify({ id, expiresAt: new Date(expiresAt).toISOString() }),
      location: `/users/${id}`,
    };
  }

  create(body: Record<string, unknown>): Expected {
    const id = this.nextId();
    const json = represent(body, id);
    this.users.set(id, { json, alias: undefined });
    this.issue(id);
    return { status: 201, body: json, location: `/users/${id}` };
  }

  listing(): string {
    const ids = [...this.users.keys()].sort((a, b) => a - b);
    return `{"items":[${ids.map((id) => this.users.get(id)!.json).join(',')}],"next":null}`;
  }
}

/** API.md: the body with `id` appended, or kept in place when the body has it. */
function represent(body: Record<string, unknown>, id: number): string {
  return JSON.stringify(Object.assign({}, body, { id }));
}

type Ref = { kind: 'id'; id: number } | { kind: 'alias'; alias: string };

// ---------------------------------------------------------------- commands

/**
 * Commands are plain data drawn without knowing the state; `pick` numbers
 * are mapped onto the state when the command runs, so a shrunk sequence
 * still means something.
 */
type Command =
  | {
      kind: 'put-alias';
      alias: string;
      name: string;
      team: boolean;
      bodyId: 'none' | 'next' | 'fresh' | 'issued';
      pick: number;
    }
  | { kind: 'put-id'; pick: number; name: string; bodyId: 'none' | 'same' | 'other' }
  | { kind: 'move'; pick: number; viaAlias: boolean; name: string; target: 'fresh' | 'issued'; offset: number }
  | { kind: 'delete'; pick: number; viaAlias: boolean }
  | { kind: 'get'; pick: number; viaAlias: boolean }
  | { kind: 'reserve' }
  | { kind: 'create'; name: string }
  | { kind: 'tick' }
  | { kind: 'restart' };

const name = fc.constantFrom(...NAMES);
const pick = fc.nat({ max: 1000 });
const command: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('put-alias' as const),
      alias: fc.constantFrom(...ALIASES),
      name,
      team: fc.boolean(),
      bodyId: fc.constantFrom('none' as const, 'none' as const, 'next' as const, 'fresh' as const, 'issued' as const),
      pick,
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('put-id' as const),
      pick,
      name,
      bodyId: fc.constantFrom('none' as const, 'same' as const, 'other' as const),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('move' as const),
      pick,
      viaAlias: fc.boolean(),
      name,
      target: fc.constantFrom('fresh' as const, 'fresh' as const, 'issued' as const),
      offset: fc.nat({ max: 3 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), pick, viaAlias: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('get' as const), pick, viaAlias: fc.boolean() }) },
  { weight: 3, arbitrary: fc.constant({ kind: 'reserve' as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('create' as const), name }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'tick' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'restart' as const }) },
);

/** Any id worth aiming at: issued ones, moved-from ones, and a couple never issued. */
function someId(model: Model, n: number): number {
  const candidates = [...new Set([...model.issued, ...model.moved.keys(), model.nextId(), model.nextId() + 1])].sort(
    (a, b) => a - b,
  );
  return candidates[n % candidates.length]!;
}

function someRef(model: Model, n: number, viaAlias: boolean): Ref {
  return viaAlias ? { kind: 'alias', alias: ALIASES[n % ALIASES.length]! } : { kind: 'id', id: someId(model, n) };
}

function refPath(ref: Ref): string {
  return ref.kind === 'alias' ? `/users/${ref.alias}` : `/users/${ref.id}`;
}

/** An id never issued, `offset` places past the next one in turn. */
function freshId(model: Model, offset: number): number {
  let id = model.nextId() + 1 + offset;
  while (model.issued.has(id)) id++;
  return id;
}

function someIssued(model: Model, n: number): number | undefined {
  const issued = [...model.issued].sort((a, b) => a - b);
  return issued.length === 0 ? undefined : issued[n % issued.length];
}

// ---------------------------------------------------------------- the system

class System {
  running: RunningServer | undefined;
  readonly logged: string[] = [];

  constructor(
    private readonly dataDir: string,
    private readonly model: Model,
  ) {}

  async start(): Promise<void> {
    const { config } = parseConfig([], {});
    this.running = await startServer(
      {
        ...config,
        ...TEST_DEFAULTS,
        store: 'journal',
        data: this.dataDir,
        allowIdChange: true,
        reservationTtl: TTL_SECONDS,
      },
      {
        env: { USERS_ADMIN_PASSWORD: ADMIN_PASSWORD },
        logError: (message) => this.logged.push(message),
        clock: () => this.model.now,
      },
    );
  }

  async stop(): Promise<void> {
    await this.running?.stop();
    this.running = undefined;
  }

  get url(): string {
    return this.running!.url;
  }
}

/** How often each kind of answer came up, for the diagnostic line. */
const seen = new Map<string, number>();

function assertAnswer(reply: Reply, expected: Expected, where: string): void {
  const kind = `${where.split(' ')[0]} ${expected.status}`;
  seen.set(kind, (seen.get(kind) ?? 0) + 1);
  const label = `${where}: ${reply.status} ${reply.text}`;
  assert.equal(reply.status, expected.status, `${label}: status`);
  if (expected.problem !== undefined) {
    assert.equal(reply.json().type, PROBLEM_TYPE_PREFIX + expected.problem, `${label}: problem type`);
  } else {
    assert.equal(reply.text, expected.body, `${label}: body`);
  }
  assert.equal(reply.headers.location, expected.location, `${label}: Location`);
  if (expected.contentLocation !== undefined || expected.status < 300)
    assert.equal(reply.headers['content-location'], expected.contentLocation, `${label}: Content-Location`);
}

/** Runs one command on both sides and compares; returns a line for the failure report. */
async function step(system: System, model: Model, c: Command): Promise<string> {
  switch (c.kind) {
    case 'put-alias': {
      const ref: Ref = { kind: 'alias', alias: c.alias };
      const body: Record<string, unknown> = { name: c.name };
      const issued = someIssued(model, c.pick);
      const id =
        c.bodyId === 'next'
          ? model.nextId()
          : c.bodyId === 'fresh'
            ? freshId(model, c.pick % 3)
            : c.bodyId === 'issued'
              ? issued
              : undefined;
      if (id !== undefined) body.id = id;
      if (c.team) body.team = 'red';
      const reply = await send(system.url, 'PUT', refPath(ref), { json: body });
      const line = `PUT ${refPath(ref)} ${JSON.stringify(body)}`;
      assertAnswer(reply, model.put(ref, body), line);
      return line;
    }
    case 'put-id': {
      const id = someId(model, c.pick);
      const ref: Ref = { kind: 'id', id };
      const body: Record<string, unknown> = { name: c.name };
      if (c.bodyId === 'same') body.id = id;
      if (c.bodyId === 'other') body.id = someId(model, c.pick + 1);
      const reply = await send(system.url, 'PUT', refPath(ref), { json: body });
      const line = `PUT ${refPath(ref)} ${JSON.stringify(body)}`;
      assertAnswer(reply, model.put(ref, body), line);
      return line;
    }
    case 'move': {
      const ids = [...model.users.keys()].sort((a, b) => a - b);
      if (ids.length === 0) return 'move: no user';
      const from = ids[c.pick % ids.length]!;
      const alias = model.users.get(from)!.alias;
      const ref: Ref = c.viaAlias && alias !== undefined ? { kind: 'alias', alias } : { kind: 'id', id: from };
      const to = c.target === 'issued' ? someIssued(model, c.pick + c.offset)! : freshId(model, c.offset);
      if (to === from) return 'move: onto itself';
      // The id goes in the middle: it must stay where the body put it.
      const body = { name: c.name, id: to, moved: true };
      const reply = await send(system.url, 'PUT', refPath(ref), { json: body });
      const line = `PUT ${refPath(ref)} ${JSON.stringify(body)}`;
      assertAnswer(reply, model.put(ref, body), line);
      return line;
    }
    case 'delete': {
      const ref = someRef(model, c.pick, c.viaAlias);
      const reply = await send(system.url, 'DELETE', refPath(ref));
      assertAnswer(reply, model.delete(ref), `DELETE ${refPath(ref)}`);
      return `DELETE ${refPath(ref)}`;
    }
    case 'get': {
      const ref = someRef(model, c.pick, c.viaAlias);
      const reply = await send(system.url, 'GET', refPath(ref));
      assertAnswer(reply, model.get(ref), `GET ${refPath(ref)}`);
      return `GET ${refPath(ref)}`;
    }
    case 'reserve': {
      const reply = await send(system.url, 'POST', '/reservations');
      assertAnswer(reply, model.reserve(), 'POST /reservations');
      return 'POST /reservations';
    }
    case 'create': {
      const body = { name: c.name };
      const reply = await send(system.url, 'POST', '/users/new', { json: body });
      assertAnswer(reply, model.create(body), 'POST /users/new');
      return `POST /users/new ${JSON.stringify(body)}`;
    }
    case 'tick':
      // Past every live reservation's expiry.
      model.now += (TTL_SECONDS + 1) * 1000;
      return 'tick';
    case 'restart':
      await system.stop();
      await system.start();
      return 'restart';
  }
}

async function assertSameListing(system: System, model: Model, where: string): Promise<void> {
  const list = await send(system.url, 'GET', '/users?limit=1000');
  assert.equal(list.status, 200);
  assert.equal(list.text, model.listing(), `${where}: GET /users equals the model`);
  for (const [alias, id] of model.aliases) {
    const read = await send(system.url, 'GET', `/users/${alias}`);
    assert.equal(read.headers['content-location'], `/users/${id}`, `${where}: the alias ${alias} names user ${id}`);
  }
}

async function runSequence(t: TestContext, commands: Command[]): Promise<void> {
  // A whole second, so expiresAt has a fixed form.
  const model = new Model(Math.floor(Date.now() / 1000) * 1000);
  const system = new System(tempDir(t, 'users-server-model-'), model);
  await system.start();
  const done: string[] = [];
  try {
    for (const c of commands) done.push(await step(system, model, c));
    await assertSameListing(system, model, 'at the end');
    await system.stop();
    await system.start();
    await assertSameListing(system, model, 'after a last restart');
    assert.deepEqual(system.logged, [], 'nothing was logged as an unexpected error');
  } catch (error) {
    // The steps that ran, so a failure reads as a transcript.
    if (error instanceof Error) error.message += `\nafter: ${done.join(' | ')}`;
    throw error;
  } finally {
    await system.stop();
  }
}

test('model: random PUT (id, alias, move), DELETE, GET, POST /reservations, POST /users/new, expiry and restarts answer exactly as the API.md model says, and the final listing matches it', async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.array(command, { minLength: 10, maxLength: 60, size: 'max' }), (commands) =>
      runSequence(t, commands),
    ),
    { numRuns: 25, includeErrorInReport: true },
  );
  t.diagnostic(
    `answers: ${[...seen]
      .sort((a, b) => (a[0] < b[0] ? -1 : 1))
      .map(([k, n]) => `${k} x${n}`)
      .join(', ')}`,
  );
});

test('model: a fixed sequence through every command kind matches the model (a smoke test of the harness)', async (t) => {
  await runSequence(t, [
    { kind: 'put-alias', alias: 'ann', name: 'Ann', team: true, bodyId: 'none', pick: 0 },
    { kind: 'reserve' },
    { kind: 'create', name: 'Ben' },
    { kind: 'put-id', pick: 1, name: 'Cyd', bodyId: 'same' },
    { kind: 'move', pick: 0, viaAlias: true, name: 'Ann', target: 'fresh', offset: 2 },
    { kind: 'get', pick: 0, viaAlias: false },
    { kind: 'reserve' },
    { kind: 'tick' },
    { kind: 'put-id', pick: 4, name: 'Dee', bodyId: 'none' },
    { kind: 'restart' },
    { kind: 'delete', pick: 0, viaAlias: true },
    { kind: 'put-alias', alias: 'ann', name: 'Ann', team: false, bodyId: 'fresh', pick: 0 },
    { kind: 'move', pick: 0, viaAlias: false, name: 'Ben', target: 'issued', offset: 0 },
  ]);
});
