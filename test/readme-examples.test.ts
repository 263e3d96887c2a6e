/**
 * The README's usersctl examples run as written (issue 20): the shell block
 * of "## usersctl", line by line in bash with pipefail, with `usersctl` on
 * PATH (as after `npm ci`, where `npx usersctl` runs the same file), in a
 * folder holding `data/admin-password` as a first start leaves it. Where a
 * line's comment shows its output (`# OK`, `# 1`, `# {...}`), the output
 * must be exactly that. The one change: USERSCTL_URL names the test server.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ADMIN_PASSWORD, startTestServer } from './helpers.js';
import { shellWithUsersctl } from './cli-helpers.js';
import { runTool } from './processes.js';

const README = fileURLToPath(new URL('../README.md', import.meta.url));

/** The non-blank lines of the first ```sh block after the heading `## SECTION`. */
function shBlockOf(section: string): string[] {
  const text = readFileSync(README, 'utf8');
  const from = text.indexOf(`\n## ${section}`);
  const block = /```sh\n([\s\S]*?)```/.exec(text.slice(from))![1]!;
  return block.split('\n').filter((line) => line.trim() !== '');
}

test('the README\'s usersctl examples run as written, and print what their comments show', async (t) => {
  if ((await runTool(t, 'sh', ['-c', 'command -v jq && command -v bash']).catch(() => undefined))?.code !== 0) return t.skip('jq or bash not found');
  const server = await startTestServer(t);
  const { home, env } = shellWithUsersctl(t, server.url);
  mkdirSync(join(home, 'data'));
  writeFileSync(join(home, 'data', 'admin-password'), ADMIN_PASSWORD + '\n');
  const lines = shBlockOf('usersctl');
  assert.ok(lines.length >= 8, lines.join('\n'));
  assert.match(lines[0]!, /^export USERSCTL_URL=http:\/\/127\.0\.0\.1:8080$/);
  const exported = `export USERSCTL_URL=${server.url}`;
  for (const line of lines.slice(1)) {
    const [command, comment] = line.split(/\s+# /);
    const run = await runTool(t, 'bash', ['-o', 'pipefail', '-c', `cd "$HOME" && ${exported} && ${command}`], { env });
    assert.equal(run.code, 0, `${command}\n${run.stderr}`);
    const shown = comment?.trim();
    if (shown !== undefined && /^(OK|\d+|\{.*\})$/.test(shown)) assert.equal(run.stdout.trim(), shown, command);
  }
});

test('the README\'s accounts examples run as written against a data directory a server made (DIR), each password typed as the first line of stdin', async (t) => {
  if ((await runTool(t, 'sh', ['-c', 'command -v bash']).catch(() => undefined))?.code !== 0) return t.skip('bash not found');
  const server = await startTestServer(t, { store: 'journal' });
  const lines = shBlockOf('Accounts');
  assert.ok(lines.length >= 6 && lines.every((l) => l.startsWith('node bin/users-server.js accounts') || l.includes('| node bin/users-server.js accounts')), lines.join('\n'));
  const root = fileURLToPath(new URL('..', import.meta.url));
  for (const line of lines) {
    const [command] = line.split(/\s+# /);
    const run = await runTool(t, 'bash', ['-o', 'pipefail', '-c', `cd "${root}" && ${command!.replaceAll('DIR', server.dataDir)}`], {
      env: { ...process.env, PW: 'the password of bob', USERS_PASSWORD_COST: '1' },
      input: 'a password typed twice\n',
    });
    assert.equal(run.code, 0, `${command}\n${run.stderr}`);
  }
});
