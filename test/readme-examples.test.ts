/**
 * The README's tour runs as written: the shell block of "## A tour", line
 * by line in bash with pipefail, with `usersctl` on PATH (as after `npm
 * link`), in a folder holding `data/admin-password` as a first start leaves
 * it, the jar where usersctl keeps it by default. Where a line's comment
 * shows its output (`# OK`, `# 1`, `# {...}`), the output must be exactly
 * that. The one change: the server's address is the test server's. The
 * accounts examples of docs/operations.md run too, against a data
 * directory a server made.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ADMIN_PASSWORD, AS_SHIPPED, startTestServer } from './helpers.js';
import { shellWithUsersctl } from './cli-helpers.js';
import { runTool } from './processes.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The non-blank lines of the first ```sh block after the heading `## SECTION` of `page`. */
function shBlockOf(page: string, section: string): string[] {
  const text = readFileSync(join(ROOT, page), 'utf8');
  const from = text.indexOf(`\n## ${section}`);
  const block = /```sh\n([\s\S]*?)```/.exec(text.slice(from))![1]!;
  return block.split('\n').filter((line) => line.trim() !== '');
}

test("the README's tour runs as written, and prints what its comments show", async (t) => {
  if (
    (await runTool(t, 'sh', ['-c', 'command -v jq && command -v bash && command -v curl']).catch(() => undefined))
      ?.code !== 0
  )
    return t.skip('jq, bash or curl not found');
  const server = await startTestServer(t, AS_SHIPPED);
  const { home, env } = shellWithUsersctl(t, server.url);
  const { XDG_STATE_HOME: _default, ...shell } = env;
  mkdirSync(join(home, 'data'));
  writeFileSync(join(home, 'data', 'admin-password'), ADMIN_PASSWORD + '\n');
  const lines = shBlockOf('README.md', 'A tour');
  assert.ok(lines.length >= 12, lines.join('\n'));
  for (const line of lines) {
    const [command, comment] = line.split(/\s+# /);
    const run = await runTool(
      t,
      'bash',
      ['-o', 'pipefail', '-c', `cd "$HOME" && ${command!.replaceAll('http://127.0.0.1:8080', server.url)}`],
      { env: shell },
    );
    assert.equal(run.code, 0, `${command}\n${run.stderr}`);
    const shown = /^("?OK"?|\d+|\{.*\})(:|$)/.exec(comment?.trim() ?? '')?.[1];
    if (shown !== undefined) assert.equal(run.stdout.trim(), shown, command);
  }
});

test('the accounts examples of docs/operations.md run as written against a data directory a server made (DIR), each password typed as the first line of stdin', async (t) => {
  if ((await runTool(t, 'sh', ['-c', 'command -v bash']).catch(() => undefined))?.code !== 0)
    return t.skip('bash not found');
  const server = await startTestServer(t, { ...AS_SHIPPED, store: 'journal' });
  const { env } = shellWithUsersctl(t, server.url);
  const lines = shBlockOf('docs/operations.md', 'Accounts');
  assert.ok(
    lines.length >= 6 &&
      lines.every((l) => l.startsWith('users-server accounts') || l.includes('| users-server accounts')),
    lines.join('\n'),
  );
  for (const line of lines) {
    const [command] = line.split(/\s+# /);
    const run = await runTool(t, 'bash', ['-o', 'pipefail', '-c', command!.replaceAll('DIR', server.dataDir)], {
      env: { ...env, PW: 'the password of bob', USERS_PASSWORD_COST: '1' },
      input: 'a password typed twice\n',
    });
    assert.equal(run.code, 0, `${command}\n${run.stderr}`);
  }
});
