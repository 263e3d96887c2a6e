/**
 * Every example of `usersctl --help` and of each command's `--help` (and
 * each subcommand's: `tokens create --help`) runs as
 * written (issue 20): in bash with pipefail, with `usersctl` on PATH (the
 * built bin/usersctl.js), jq and the files the examples name, against a
 * server with --allow-id-change (for `mv`). Skips when bash or jq is missing.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { run } from '../cli/main.js';
import { ADMIN_PASSWORD, AS_SHIPPED, startTestServer } from './helpers.js';
import { shellWithUsersctl } from './cli-helpers.js';
import { runTool } from './processes.js';

/** The example lines of a help text: the indented lines after "Example:" or "Examples:". */
function examplesOf(help: string): string[] {
  const found: string[] = [];
  let inExamples = false;
  for (const line of help.split('\n')) {
    if (/^Examples?:$/.test(line)) inExamples = true;
    else if (inExamples && line.startsWith('  ')) found.push(line.trim());
    else if (line.trim() === '' || !line.startsWith(' ')) inExamples = false;
  }
  return found;
}

/** The commands a help text lists under "Commands:", help left out. */
function subcommandsOf(help: string): string[] {
  const start = help.indexOf('Commands:');
  if (start === -1) return [];
  const listed = help.slice(start, help.indexOf('\n\n', start));
  return [...listed.matchAll(/^ {2}([a-z]+)\b/gm)].map((m) => m[1]!).filter((c) => c !== 'help');
}

test('every help of usersctl fits 80 columns and has an example, and every example runs as written and exits 0', async (t) => {
  for (const tool of ['bash', 'jq']) {
    if ((await runTool(t, 'sh', ['-c', `command -v ${tool}`]).catch(() => undefined))?.code !== 0)
      return t.skip(`${tool} not found`);
  }
  const server = await startTestServer(t, { ...AS_SHIPPED, allowIdChange: true });
  const { home, env: shell } = shellWithUsersctl(t, server.url);
  writeFileSync(join(home, '.users-password'), ADMIN_PASSWORD + '\n');
  writeFileSync(join(home, 'people.ndjson'), '{"name":"Pat","login":"pat"}\n{"name":"Sam","login":"sam"}\n');
  const env = { ...shell, PASSWORD: ADMIN_PASSWORD };
  // The help texts are read in process (they are the same program): only the examples run as processes.
  const help = async (args: string[]) => {
    let out = '';
    await run(args, {
      stdout: Object.assign(new PassThrough(), { write: (chunk: string) => ((out += chunk), true) }),
      env,
    });
    return out;
  };
  const main = await help(['--help']);
  const commands = subcommandsOf(main);
  const texts: Record<string, string> = { usersctl: main };
  // Each command's own examples first (import's reads users.ndjson as written here), then the main ones.
  writeFileSync(join(home, 'users.ndjson'), '{"name":"Una"}\n{"name":"Vic"}\n');
  const examples: string[] = [];
  for (const command of commands) {
    const own = await help([command, '--help']);
    texts[command] = own;
    examples.push(...examplesOf(own));
    // A command with commands of its own (tokens): theirs too, in the order listed.
    for (const sub of subcommandsOf(own)) {
      texts[`${command} ${sub}`] = await help([command, sub, '--help']);
      examples.push(...examplesOf(texts[`${command} ${sub}`]!));
    }
  }
  // For a reader at a terminal: every help fits 80 columns and ends with an example.
  for (const [command, text] of Object.entries(texts)) {
    for (const line of text.split('\n'))
      assert.ok(line.length <= 80, `${command} --help: a line of ${line.length} columns: ${line}`);
    if (command !== 'usersctl' && command !== 'completion' && command !== 'tokens')
      assert.ok(examplesOf(text).length > 0, `${command} --help has no example`);
  }
  examples.push(...examplesOf(main));
  assert.ok(examples.length >= 15, `only ${examples.length} examples found`);
  assert.ok(
    examples.some((e) => e.includes('usersctl tokens revoke prometheus')),
    "the subcommands' examples are run too",
  );
  for (const example of examples) {
    const run = await runTool(t, 'bash', ['-o', 'pipefail', '-c', `cd "$HOME" && ${example}`], { env });
    assert.equal(run.code, 0, `${example}\nexit ${run.code}\nstderr: ${run.stderr}`);
  }
});
