/**
 * Shell completion and man pages (issue 20), generated from the same
 * definitions as --help: bash completes commands and each command's
 * options; the fish script names every command; the man pages list every
 * command and option --help lists, render with man(1), and ship in the
 * package (npm pack).
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { buildIfStale } from './helpers.js';
import { CLI_BIN, runTool, SERVER_BIN } from './processes.js';

async function have(t: TestContext, tool: string): Promise<boolean> {
  return (await runTool(t, 'sh', ['-c', `command -v ${tool}`]).catch(() => undefined))?.code === 0;
}

/** The command names of a --help text: the "Commands:" section only. */
function commandsOf(help: string): string[] {
  const section = help.slice(help.indexOf('Commands:'), help.indexOf('\n\n', help.indexOf('Commands:')));
  return [...section.matchAll(/^ {2}([a-z]+)\b/gm)].map((m) => m[1]!).filter((c) => c !== 'help');
}

function built(): void {
  const stale = buildIfStale();
  if (stale !== undefined) throw new Error(stale);
}

/** What bash's completion offers for the words typed so far (the last one being completed). */
async function complete(t: TestContext, words: string[]): Promise<string[]> {
  const script = `eval "$("${process.execPath}" "${CLI_BIN}" completion bash)"; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _usersctl; printf '%s\\n' "\${COMPREPLY[@]}"`;
  const run = await runTool(t, 'bash', ['-c', script]);
  assert.equal(run.code, 0, run.stderr);
  return run.stdout.split('\n').filter((l) => l !== '');
}

test('usersctl completion bash: completes command names, and the options of the command typed (tokens: its commands, then theirs)', async (t) => {
  if (!(await have(t, 'bash'))) return t.skip('bash not found');
  built();
  assert.deepEqual(await complete(t, ['usersctl', 'g']), ['get']);
  assert.deepEqual((await complete(t, ['usersctl', 'im'])).sort(), ['import']);
  assert.ok((await complete(t, ['usersctl', 'get', '--e'])).includes('--etag'));
  assert.ok((await complete(t, ['usersctl', 'import', '--alias'])).includes('--alias-field'));
  assert.ok((await complete(t, ['usersctl', '--json', 'delete', '--if'])).includes('--if-match'));
  // A command of commands: its command words, then the options of the one typed.
  assert.deepEqual(await complete(t, ['usersctl', 'tokens', '']), ['create', 'list', 'revoke']);
  assert.deepEqual(await complete(t, ['usersctl', 'tokens', 'r']), ['revoke']);
  assert.ok((await complete(t, ['usersctl', 'tokens', 'create', '--ex'])).includes('--expires'));
});

test('usersctl completion fish and zsh: a script naming every command; an unknown shell is a usage error', async (t) => {
  built();
  const help = (await runTool(t, process.execPath, [CLI_BIN, '--help'])).stdout;
  const commands = commandsOf(help);
  const fish = (await runTool(t, process.execPath, [CLI_BIN, 'completion', 'fish'])).stdout;
  for (const command of commands) assert.match(fish, new RegExp(`-a ${command} -d `), command);
  if (await have(t, 'fish')) assert.equal((await runTool(t, 'fish', ['-n', '-c', fish])).code, 0);
  const zsh = await runTool(t, process.execPath, [CLI_BIN, 'completion', 'zsh']);
  assert.match(zsh.stdout, /^autoload -U \+X bashcompinit && bashcompinit$/m);
  const bad = await runTool(t, process.execPath, [CLI_BIN, 'completion', 'tcsh']);
  assert.equal(bad.code, 2);
});

test('the man pages list every command and option of --help, render with man(1), and are in the package', async (t) => {
  built();
  const help = (await runTool(t, process.execPath, [CLI_BIN, '--help'])).stdout;
  const page = (await runTool(t, process.execPath, [CLI_BIN, 'man'])).stdout;
  const commands = commandsOf(help);
  assert.ok(commands.length >= 14, commands.join(' '));
  for (const command of commands) assert.match(page, new RegExp(`^\\.SS ${command}\\b`, 'm'), `usersctl(1) lacks ${command}`);
  for (const sub of ['create', 'list', 'revoke']) assert.match(page, new RegExp(`^\\.SS tokens ${sub}\\b`, 'm'), `usersctl(1) lacks tokens ${sub}`);
  assert.ok(page.includes('\\-\\-expires'), 'a subcommand\'s options are in the page');
  for (const option of help.matchAll(/^ {2}(?:-\w, )?(--[a-z-]+)/gm)) assert.ok(page.includes(option[1]!.replaceAll('-', '\\-')), `usersctl(1) lacks ${option[1]}`);
  const serverHelp = (await runTool(t, process.execPath, [SERVER_BIN, '--help'])).stdout;
  const serverPage = (await runTool(t, process.execPath, [SERVER_BIN, 'man'])).stdout;
  for (const flag of serverHelp.matchAll(/^ {2}(--[a-z-]+)/gm)) assert.ok(serverPage.includes(`.B ${flag[1]!.replaceAll('-', '\\-')}`), `users-server(1) lacks ${flag[1]}`);
  if (await have(t, 'man')) {
    const rendered = await runTool(t, 'sh', ['-c', `"${process.execPath}" "${CLI_BIN}" man > "$0" && MANWIDTH=100 man -l "$0"`, `${process.env.TMPDIR ?? '/tmp'}/usersctl-test-${process.pid}.1`]);
    assert.equal(rendered.code, 0, rendered.stderr);
    assert.match(rendered.stdout, /^USERSCTL\(1\)/);
  }
  const pack = await runTool(t, 'npm', ['pack', '--dry-run', '--json', '--ignore-scripts']);
  if (pack.code === 0) {
    const files = (JSON.parse(pack.stdout) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path);
    assert.ok(files.includes('dist/man/usersctl.1') && files.includes('dist/man/users-server.1'), `the package lacks the man pages: ${files.filter((f) => f.includes('man')).join(' ')}`);
  }
});
