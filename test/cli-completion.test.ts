/**
 * Shell completion and man pages (issue 20), generated from the same
 * definitions as --help: bash completes commands and each command's
 * options; the fish script names every command; the man pages list every
 * command and option --help lists and render with man(1). That they ship
 * in the package is checked with the rest of it (test/deploy.test.ts).
 * usersctl and users-server run in process: `npm run build` writes the man
 * pages with the executables, and test/cli-bin.test.ts and the examples of
 * docs/cli.md run `usersctl completion` through them.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { runUsersServer, tempDir } from './helpers.js';
import { usersctl } from './cli-helpers.js';
import { runTool } from './processes.js';

async function have(t: TestContext, tool: string): Promise<boolean> {
  return (await runTool(t, 'sh', ['-c', `command -v ${tool}`]).catch(() => undefined))?.code === 0;
}

/** The command names of a --help text: the "Commands:" section only. */
function commandsOf(help: string): string[] {
  const section = help.slice(help.indexOf('Commands:'), help.indexOf('\n\n', help.indexOf('Commands:')));
  return [...section.matchAll(/^ {2}([a-z]+)\b/gm)].map((m) => m[1]!).filter((c) => c !== 'help');
}

/** What `usersctl ARGS` prints, asserting exit 0. */
async function output(args: string[]): Promise<string> {
  const run = await usersctl(args);
  assert.equal(run.code, 0, run.stderr);
  return run.stdout;
}

/**
 * What bash's completion offers for the words typed so far (the last one being completed), with the script `usersctl
 * completion bash` printed.
 */
async function completeWith(t: TestContext, script: string, words: string[]): Promise<string[]> {
  const run = await runTool(t, 'bash', [
    '-c',
    `source "$0"; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _usersctl; printf '%s\\n' "\${COMPREPLY[@]}"`,
    script,
  ]);
  assert.equal(run.code, 0, run.stderr);
  return run.stdout.split('\n').filter((l) => l !== '');
}

test('usersctl completion bash: completes command names, and the options of the command typed (tokens: its commands, then theirs)', async (t) => {
  if (!(await have(t, 'bash'))) return t.skip('bash not found');
  const script = join(tempDir(t, 'usersctl-completion-'), 'usersctl.bash');
  writeFileSync(script, await output(['completion', 'bash']));
  const complete = (words: string[]) => completeWith(t, script, words);
  assert.deepEqual(await complete(['usersctl', 'g']), ['get']);
  assert.deepEqual((await complete(['usersctl', 'im'])).sort(), ['import']);
  assert.ok((await complete(['usersctl', 'get', '--e'])).includes('--etag'));
  assert.ok((await complete(['usersctl', 'import', '--alias'])).includes('--alias-field'));
  assert.ok((await complete(['usersctl', '--json', 'delete', '--if'])).includes('--if-match'));
  // A command of commands: its command words, then the options of the one typed.
  assert.deepEqual(await complete(['usersctl', 'tokens', '']), ['create', 'list', 'revoke']);
  assert.deepEqual(await complete(['usersctl', 'tokens', 'r']), ['revoke']);
  assert.ok((await complete(['usersctl', 'tokens', 'create', '--ex'])).includes('--expires'));
});

test('usersctl completion fish and zsh: a script naming every command; an unknown shell is a usage error', async (t) => {
  const help = await output(['--help']);
  const commands = commandsOf(help);
  const fish = (await usersctl(['completion', 'fish'])).stdout;
  for (const command of commands) assert.match(fish, new RegExp(`-a ${command} -d `), command);
  if (await have(t, 'fish')) assert.equal((await runTool(t, 'fish', ['-n', '-c', fish])).code, 0);
  const zsh = await usersctl(['completion', 'zsh']);
  assert.match(zsh.stdout, /^autoload -U \+X bashcompinit && bashcompinit$/m);
  const bad = await usersctl(['completion', 'tcsh']);
  assert.equal(bad.code, 2);
});

test('the man pages list every command and option of --help, and render with man(1)', async (t) => {
  const help = await output(['--help']);
  const page = await output(['man']);
  const commands = commandsOf(help);
  assert.ok(commands.length >= 14, commands.join(' '));
  for (const command of commands)
    assert.match(page, new RegExp(`^\\.SS ${command}\\b`, 'm'), `usersctl(1) lacks ${command}`);
  for (const sub of ['create', 'list', 'revoke'])
    assert.match(page, new RegExp(`^\\.SS tokens ${sub}\\b`, 'm'), `usersctl(1) lacks tokens ${sub}`);
  assert.ok(page.includes('\\-\\-expires'), "a subcommand's options are in the page");
  for (const option of help.matchAll(/^ {2}(?:-\w, )?(--[a-z-]+)/gm))
    assert.ok(page.includes(option[1]!.replaceAll('-', '\\-')), `usersctl(1) lacks ${option[1]}`);
  const serverHelp = (await runUsersServer(['--help'])).stdout;
  const serverPage = (await runUsersServer(['man'])).stdout;
  for (const flag of serverHelp.matchAll(/^ {2}(--[a-z-]+)/gm))
    assert.ok(serverPage.includes(`.B ${flag[1]!.replaceAll('-', '\\-')}`), `users-server(1) lacks ${flag[1]}`);
  if (await have(t, 'man')) {
    const file = join(tempDir(t, 'usersctl-man-'), 'usersctl.1');
    writeFileSync(file, page);
    const rendered = await runTool(t, 'sh', ['-c', 'MANWIDTH=100 man -l "$0"', file]);
    assert.equal(rendered.code, 0, rendered.stderr);
    assert.match(rendered.stdout, /^USERSCTL\(1\)/);
  }
});
