/**
 * The docs are made for people who came to do something: a README read in
 * five minutes (at most 200 lines, the first command within 30), a
 * performance page that describes rather than narrates (at most 400
 * lines), and no page that names a command or a flag the programs do not
 * have.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { run } from '../cli/main.js';
import { runUsersServer } from './helpers.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PAGES = [
  'README.md',
  'CHANGELOG.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((n) => n.endsWith('.md'))
    .map((n) => `docs/${n}`),
];
const read = (page: string) => readFileSync(join(ROOT, page), 'utf8');

test('the README: at most 200 lines, the install-and-run and the test commands within its first 30', () => {
  const lines = read('README.md').split('\n');
  assert.ok(lines.length <= 200, `the README has ${lines.length} lines`);
  const first = lines.findIndex((line, i) => i > 0 && lines[i - 1] === '```sh');
  assert.ok(first >= 0 && first < 30, `the first command is at line ${first + 1}`);
  assert.match(lines[first]!, /^npm ci && npm link/);
  const test = lines.findIndex((line) => line === 'npm ci && npm test');
  assert.ok(test >= 0 && test < 30, `the test command is at line ${test + 1}`);
});

test('docs/performance.md has at most 400 lines', () => {
  const count = read('docs/performance.md').split('\n').length;
  assert.ok(count <= 400, `docs/performance.md has ${count} lines`);
});

test("users-server --help and each of its commands' --help fit 80 columns", async () => {
  for (const command of [
    [],
    ['accounts'],
    ['repair'],
    ['migrate'],
    ['copy'],
    ['backup'],
    ['config'],
    ['index'],
    ['schema'],
  ]) {
    const help = (await runUsersServer([...command, '--help'])).stdout;
    assert.ok(help.length > 100, `users-server ${command.join(' ')} --help printed ${help}`);
    for (const line of help.split('\n'))
      assert.ok(line.length <= 80, `users-server ${command.join(' ')} --help: ${line.length} columns: ${line}`);
  }
});

/** What a program's help texts name: its commands and its flags. */
interface Names {
  commands: Set<string>;
  flags: Set<string>;
}

const FLAG = /(?<![\w-])--?[a-z][a-z0-9-]*/g;

function namesIn(texts: readonly string[], commands: readonly string[]): Names {
  return { commands: new Set(commands), flags: new Set(texts.flatMap((text) => text.match(FLAG) ?? [])) };
}

async function usersctlNames(): Promise<Names> {
  const help = async (args: string[]) => {
    let out = '';
    await run(args, {
      stdout: Object.assign(new PassThrough(), { write: (chunk: string) => ((out += chunk), true) }),
      env: {},
    });
    return out;
  };
  const main = await help(['--help']);
  const listed = main.slice(main.indexOf('Commands:'));
  const commands = [...listed.matchAll(/^ {2}([a-z]+)\b/gm)].map((m) => m[1]!);
  const texts = [main, ...(await Promise.all(commands.map((c) => help([c, '--help']))))];
  for (const sub of ['create', 'list', 'revoke']) texts.push(await help(['tokens', sub, '--help']));
  return namesIn(texts, [...commands, 'man']);
}

async function usersServerNames(): Promise<Names> {
  const main = (await runUsersServer(['--help'])).stdout;
  const commands = [...new Set([...main.matchAll(/users-server ([a-z]+)/g)].map((m) => m[1]!))];
  const texts = [main, ...(await Promise.all(commands.map(async (c) => (await runUsersServer([c, '--help'])).stdout)))];
  return namesIn(texts, [...commands, 'man']);
}

/** usersctl's global options that take a value: the word after them is not the command. */
const VALUE_OPTIONS = new Set(['--url', '--cookie-jar', '--token', '--timeout', '--retries']);

/**
 * Each place a page calls `program` in code (a fenced block's line, an inline code span): the words up to the end of
 * that command.
 */
function calls(page: string, program: string): { where: string; words: string[] }[] {
  const text = read(page);
  const code: { line: number; text: string }[] = [];
  let fenced = false;
  text.split('\n').forEach((line, i) => {
    if (line.startsWith('```')) fenced = !fenced;
    else if (fenced) code.push({ line: i + 1, text: line });
    else for (const span of line.match(/`[^`]+`/g) ?? []) code.push({ line: i + 1, text: span.slice(1, -1) });
  });
  const found: { where: string; words: string[] }[] = [];
  // Where a shell starts a command: the start (after a prompt and variables), or after | ; && || ( $( and a few
  // runners.
  const call = new RegExp(
    `(?:^(?:\\$ )?(?:\\w+=\\S* +)*|[|;&(] *|\\$\\( *|(?:exec|sudo|xargs|--) +)${program}(?=\\s|$)((?:[ \\t]+[^\\s|;&()\`#"']+)*)`,
    'g',
  );
  for (const { line, text: snippet } of code) {
    const command = snippet.replace(/(^|\s)#.*$/, '').trim();
    for (const match of command.matchAll(call))
      found.push({
        where: `${page}:${line}: ${snippet.trim()}`,
        words: match[1]!
          .trim()
          .split(/\s+/)
          .filter((w) => w !== ''),
      });
  }
  return found;
}

/** The problems of one call: a command or a flag the program does not have. */
function problems(words: readonly string[], names: Names, commandAfterOptions: boolean): string[] {
  const found: string[] = [];
  let seenCommand = false;
  for (let i = 0; i < words.length; i++) {
    const word = words[i]!;
    const flag = /^--?[a-z][a-z0-9-]*/.exec(word)?.[0];
    if (flag !== undefined) {
      if (!names.flags.has(flag)) found.push(`no flag ${flag}`);
      if (VALUE_OPTIONS.has(flag) && !word.includes('=')) i++;
      continue;
    }
    const first = commandAfterOptions ? !seenCommand : i === 0;
    if (first && /^[a-z][a-z-]*$/.test(word) && !names.commands.has(word)) found.push(`no command ${word}`);
    if (/^[a-z]/.test(word)) seenCommand = true;
    if (!commandAfterOptions) break;
  }
  return found;
}

test('docs name only commands and flags that usersctl and users-server have', async () => {
  const programs = [
    { program: 'usersctl', names: await usersctlNames(), commandAfterOptions: true },
    { program: 'users-server', names: await usersServerNames(), commandAfterOptions: false },
  ];
  const wrong: string[] = [];
  let checked = 0;
  for (const page of PAGES) {
    for (const { program, names, commandAfterOptions } of programs) {
      for (const { where, words } of calls(page, program)) {
        checked++;
        for (const problem of problems(words, names, commandAfterOptions))
          wrong.push(`${where}\n    ${program}: ${problem}`);
      }
    }
  }
  assert.ok(checked > 100, `only ${checked} calls found`);
  assert.deepEqual(wrong, []);
});

test('docs/architecture.md names each member of the Store interface (server/store/store.ts), and no other, where it lists them', () => {
  const source = readFileSync(join(ROOT, 'server/store/store.ts'), 'utf8');
  const body = /export interface Store \{\n([\s\S]*?)\n\}/.exec(source)![1]!;
  // A member is a line at the interface's own indentation that is not part of a comment.
  const members = [...body.matchAll(/^ {2}(?:readonly )?(\w+)\??[(:]/gm)].map((m) => m[1]!);
  const page = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8');
  const start = page.indexOf('`Store` (`server/store/store.ts`) has one method');
  const paragraph = page.slice(start, page.indexOf('\n\n', start));
  const named = [...paragraph.matchAll(/`(\w+)`/g)].map((m) => m[1]!).filter((name) => name !== 'Store');
  assert.deepEqual([...new Set(named)].sort(), [...members].sort());
});

test('docs/architecture.md: no table cell over 80 words, so the layer table reads as a table', () => {
  const long = read('docs/architecture.md')
    .split('\n')
    .filter((line) => line.startsWith('|'))
    .flatMap((line) => line.split('|'))
    .map((cell) => cell.trim().split(/\s+/).length)
    .filter((words) => words > 80);
  assert.deepEqual(long, []);
});
