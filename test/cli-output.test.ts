/**
 * usersctl's output for people and for scripts: tables on a terminal,
 * NDJSON when piped (byte for byte what the server sent), `-o` to choose,
 * colour only on a terminal and never with NO_COLOR, and the progress of
 * `export` on a terminal's stderr only.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cellText } from '../cli/output-format.js';
import { progressLine } from '../cli/progress.js';
import { EXIT } from '../cli/exit-codes.js';
import { lines, shellWithUsersctl, startCliServer, type CliServer } from './cli-helpers.js';
import { put, send } from './helpers.js';
import { runTool } from './processes.js';

/** A server with three users: aliased, unaliased with more fields, and one with a long name. */
async function threeUsers(t: Parameters<typeof startCliServer>[0]): Promise<CliServer> {
  const cli = await startCliServer(t);
  await cli.login();
  assert.equal(
    (await put(cli.server.url, '/users/alice', { name: 'Alice', email: 'alice@example.com', team: 'red' })).status,
    201,
  );
  assert.equal(
    (await send(cli.server.url, 'POST', '/users/new', { json: { name: 'Bob', tags: ['x', 'y'] } })).status,
    201,
  );
  assert.equal((await put(cli.server.url, '/users/carol', { name: 'C'.repeat(60) })).status, 201);
  return cli;
}

test('usersctl list on a terminal prints a table of ID, ALIAS and NAME, with a bold header unless NO_COLOR; piped, the NDJSON the server sent', async (t) => {
  const cli = await threeUsers(t);
  const table = await cli.run(['list'], { stdoutTTY: true });
  assert.equal(table.code, EXIT.ok, table.stderr);
  assert.deepEqual(lines(table.stdout), [
    '\x1b[1mID  ALIAS  NAME\x1b[0m',
    '1   alice  Alice',
    '2   -      Bob',
    `3   carol  ${'C'.repeat(39)}…`,
  ]);
  const plain = await cli.run(['list'], { stdoutTTY: true, env: { NO_COLOR: '1' } });
  assert.equal(lines(plain.stdout)[0], 'ID  ALIAS  NAME');
  const piped = await cli.run(['list']);
  const served = (await send(cli.server.url, 'GET', '/users')).json() as { items: unknown[] };
  assert.equal(piped.stdout, served.items.map((u) => JSON.stringify(u) + '\n').join(''));
  assert.equal(
    (await cli.run(['--json', 'list'], { stdoutTTY: true })).stdout,
    piped.stdout,
    '--json on a terminal is NDJSON',
  );
  assert.equal((await cli.run(['list', '-o', 'ndjson'], { stdoutTTY: true })).stdout, piped.stdout);
});

test('usersctl list -o wide adds a column for every other field; -o json is one JSON array; -o table works piped', async (t) => {
  const cli = await threeUsers(t);
  const wide = await cli.run(['list', '-o', 'wide']);
  assert.deepEqual(lines(wide.stdout), [
    'ID  ALIAS  NAME                                                          EMAIL              TEAM  TAGS',
    '1   alice  Alice                                                         alice@example.com  red   -',
    '2   -      Bob                                                           -                  -     ["x","y"]',
    `3   carol  ${'C'.repeat(60)}  -                  -     -`,
  ]);
  const json = await cli.run(['list', '-o', 'json'], { stdoutTTY: true });
  assert.deepEqual(
    (JSON.parse(json.stdout) as { name: string }[]).map((u) => u.name),
    ['Alice', 'Bob', 'C'.repeat(60)],
  );
  const table = await cli.run(['list', '-o', 'table']);
  assert.equal(lines(table.stdout)[0], 'ID  ALIAS  NAME');
});

test('usersctl get on a terminal: a table with the alias also for a user got by id; -o json gives the object for one ref and an array for several', async (t) => {
  const cli = await threeUsers(t);
  const table = await cli.run(['get', '1', 'carol', '2'], { stdoutTTY: true, env: { NO_COLOR: '1' } });
  assert.equal(table.code, EXIT.ok, table.stderr);
  assert.deepEqual(
    lines(table.stdout).map((l) => l.split(/ +/).slice(0, 2)),
    [
      ['ID', 'ALIAS'],
      ['1', 'alice'],
      ['3', 'carol'],
      ['2', '-'],
    ],
  );
  const one = await cli.run(['get', 'alice', '-o', 'json']);
  assert.equal(JSON.parse(one.stdout).email, 'alice@example.com');
  const several = await cli.run(['get', 'alice', '2', '-o', 'json']);
  assert.deepEqual(
    (JSON.parse(several.stdout) as { id: number }[]).map((u) => u.id),
    [1, 2],
  );
  const missing = await cli.run(['get', 'alice', '99'], { stdoutTTY: true });
  assert.equal(missing.code, EXIT.notFound);
  assert.equal(lines(missing.stdout).length, 2, 'the users found are still shown');
  assert.match(missing.stderr, /99: No such user\./);
  const piped = await cli.run(['get', 'alice']);
  assert.equal(piped.stdout, (await send(cli.server.url, 'GET', '/users/alice')).text + '\n');
});

test('usersctl tokens list: a table on a terminal, NDJSON piped; -o and --json that contradict are a usage error naming both', async (t) => {
  const cli = await startCliServer(t);
  await cli.login();
  assert.equal((await cli.run(['tokens', 'create', 'ci'])).code, EXIT.ok);
  const table = await cli.run(['tokens', 'list'], { stdoutTTY: true, env: { NO_COLOR: '1' } });
  assert.deepEqual(
    lines(table.stdout).map((l) => l.split(/ +/).slice(1, 3)),
    [
      ['NAME', 'ROLE'],
      ['ci', 'reader'],
    ],
  );
  const wide = await cli.run(['tokens', 'list', '-o', 'wide']);
  assert.match(lines(wide.stdout)[0]!, /CREATED_WITH$/);
  const piped = await cli.run(['tokens', 'list']);
  assert.equal(JSON.parse(piped.stdout).name, 'ci');
  const both = await cli.run(['--json', 'list', '-o', 'table']);
  assert.equal(both.code, EXIT.usage);
  assert.match(both.stderr, /--json and -o table contradict each other: --json is -o ndjson/);
  const unknown = await cli.run(['list', '-o', 'yaml']);
  assert.equal(unknown.code, EXIT.usage);
  assert.match(unknown.stderr, /-o: give one of json, ndjson, table, wide, not "yaml"/);
});

test('a table cell shows what a terminal would act on as an escape, never the control itself, and marks a cut with …', () => {
  assert.equal(cellText('a\x1b[31mred\x07\n', 40), 'a\\u001b[31mred\\u0007\\u000a');
  assert.equal(cellText('\u202eevil', 40), '\\u202eevil');
  assert.equal(cellText({ k: 'v' }, 40), '{"k":"v"}');
  assert.equal(cellText(null, 40), '-');
  assert.equal(cellText('abcdef', 4), 'abc…');
});

test('the progress line: a bar, the count, the rate and the time left when the whole is known; the count and rate otherwise', () => {
  const plain = { paint: (text: string) => text };
  assert.equal(
    progressLine(plain, 'users', { done: 500, fraction: 0.25 }, 2),
    '[######------------------]  25% 500 users, 250/s, 0:06 left',
  );
  assert.equal(progressLine(plain, 'lines', { done: 90, failed: 2 }, 3), '90 lines, 2 failed, 30/s');
});

test('usersctl export on a terminal shows its progress on stderr and a last line with the count; piped stderr stays silent (in a real terminal, through script)', async (t) => {
  const script = await runTool(t, 'sh', ['-c', 'command -v script']);
  if (script.code !== 0) return t.skip('script(1) not found (util-linux)');
  const cli = await threeUsers(t);
  const { env } = shellWithUsersctl(t, cli.server.url);
  const shell = { ...env, XDG_STATE_HOME: cli.env.XDG_STATE_HOME, NO_COLOR: '1' };
  // script gives the command a terminal: stdout and stderr both go to it.
  const onTerminal = await runTool(t, 'script', ['-qec', 'usersctl export >/dev/null; usersctl list', '/dev/null'], {
    env: shell,
  });
  assert.equal(onTerminal.code, 0, onTerminal.stdout);
  const screen = onTerminal.stdout.replace(/\r/g, '');
  assert.match(screen, /usersctl: exported 3 users\n/);
  assert.match(screen, /ID {2}ALIAS {2}NAME\n1 {3}alice {2}Alice\n/);
  const piped = await runTool(t, 'sh', ['-c', 'usersctl export 2>&1 >/dev/null | cat'], { env: shell });
  assert.equal(piped.stdout, '');
});

test('--json makes failures JSON on stderr, one object a line with status, type, title, detail and ref, so a script tells 404, 409, 410 and 412 apart', async (t) => {
  const cli = await startCliServer(t);
  const json = (text: string) => lines(text).map((l) => JSON.parse(l) as Record<string, unknown>);
  const problem = (code: string) => `tag:users-server,2026:problem/${code}`;
  assert.equal((await cli.run(['put', 'alice', '--name', 'Alice'])).code, 0);
  const cases: [string[], number, number, string, string][] = [
    [['--json', 'get', 'nobody'], EXIT.notFound, 404, problem('not-found'), 'nobody'],
    [['--json', 'mv', 'alice', '500'], EXIT.conflict, 409, problem('id-conflict'), 'alice'],
    [
      ['--json', 'put', 'alice', '--name', 'A', '--if-match', '"stale"'],
      EXIT.conflict,
      412,
      problem('precondition-failed'),
      'alice',
    ],
  ];
  for (const [args, exit, status, type, ref] of cases) {
    const result = await cli.run(args);
    assert.equal(result.code, exit, result.stderr);
    const [record, ...more] = json(result.stderr);
    assert.deepEqual(more, [], 'one line');
    assert.deepEqual(
      { status: record!.status, type: record!.type, ref: record!.ref, exit: record!.exit },
      { status, type, ref, exit },
      args.join(' '),
    );
    assert.equal(typeof record!.title, 'string');
    assert.equal(typeof record!.detail, 'string');
  }
  assert.equal((await cli.run(['delete', 'alice'])).code, 0);
  const gone = await cli.run(['--json', 'put', '1', '--name', 'Again']);
  assert.deepEqual(
    json(gone.stderr).map((r) => [r.status, r.type, r.ref]),
    [[410, problem('gone'), '1']],
  );
  const several = await cli.run(['--json', 'get', 'x', 'y']);
  assert.deepEqual(
    json(several.stderr).map((r) => [r.status, r.ref]),
    [
      [404, 'x'],
      [404, 'y'],
    ],
  );
  const usage = await cli.run(['--json', 'get', 'a/b']);
  assert.deepEqual(
    json(usage.stderr).map((r) => [r.status, r.type, r.exit]),
    [[null, 'usersctl:usage', EXIT.usage]],
  );
});
