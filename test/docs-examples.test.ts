/**
 * Every ```sh example of docs/cli.md runs as written (issue 20), in order,
 * each block as one bash script with errexit and pipefail, with `usersctl`
 * on PATH (the built bin/usersctl.js), jq, and the files and accounts the
 * examples name. The one change: the example hosts (127.0.0.1:8080,
 * 127.0.0.1:8081, users.example.com, staging.example.com, new-box:8080)
 * are test servers. The scripts of
 * "Scripting" (they start with #!) are run with their arguments by
 * test/cli-scripts.test.ts. The other docs' shell blocks are users-server
 * and bench commands, run by their own tests.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { shellWithUsersctl } from './cli-helpers.js';
import { ADMIN_PASSWORD, AS_SHIPPED, startTestServer } from './helpers.js';
import { runTool } from './processes.js';

const CLI_DOC = fileURLToPath(new URL('../docs/cli.md', import.meta.url));
const DIST_MAN = fileURLToPath(new URL('../dist/man', import.meta.url));

/** The ```sh blocks of a Markdown file, in order. */
function shellBlocks(path: string): string[] {
  return [...readFileSync(path, 'utf8').matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

test('every shell example of docs/cli.md runs as written and exits 0', async (t) => {
  for (const tool of ['bash', 'jq', 'gzip']) {
    if ((await runTool(t, 'sh', ['-c', `command -v ${tool}`]).catch(() => undefined))?.code !== 0)
      return t.skip(`${tool} not found`);
  }
  const ops = { name: 'ops', role: 'admin' as const, password: 'ops-password-123' };
  const server = await startTestServer(t, { ...AS_SHIPPED, allowIdChange: true }, { accounts: [ops] });
  const staging = await startTestServer(t, AS_SHIPPED);
  const newBox = await startTestServer(t, AS_SHIPPED);
  const { home, env: shell } = shellWithUsersctl(t, server.url);
  const bin = join(home, 'bin');
  // `pass show users-server` prints the ops password, as a password store would.
  writeFileSync(join(bin, 'pass'), `#!/bin/sh\nprintf '%s\\n' '${ops.password}'\n`);
  chmodSync(join(bin, 'pass'), 0o755);
  writeFileSync(join(home, '.users-password'), ADMIN_PASSWORD + '\n');
  writeFileSync(join(home, 'erin.json'), '{"name":"Erin"}\n');
  writeFileSync(join(home, 'users.ndjson'), '{"name":"Una"}\n{"name":"Vic"}\n');
  writeFileSync(
    join(home, 'legacy.json'),
    '{"username":"lee","full_name":"Lee Legacy"}\n{"username":"max","full_name":"Max Legacy"}\n',
  );
  mkdirSync(join(home, '.config', 'fish', 'completions'), { recursive: true });
  mkdirSync(join(home, 'dist'));
  symlinkSync(DIST_MAN, join(home, 'dist', 'man'));
  const env = {
    ...shell,
    USERS_PASSWORD: ADMIN_PASSWORD,
    PW: ADMIN_PASSWORD,
    ref: 'alice',
    name: 'Alice',
    MANPAGER: 'cat',
    PAGER: 'cat',
  };
  const hasMan = (await runTool(t, 'sh', ['-c', 'command -v man'])).code === 0;

  const blocks = shellBlocks(CLI_DOC).filter((block) => !block.startsWith('#!'));
  assert.ok(blocks.length >= 15, `only ${blocks.length} blocks found`);
  for (const block of blocks) {
    let script = block
      .replaceAll('https://staging.example.com', staging.url)
      .replaceAll('http://new-box:8080', newBox.url)
      .replaceAll('http://127.0.0.1:8081', staging.url)
      .replaceAll('https://users.example.com', server.url)
      .replaceAll('http://127.0.0.1:8080', server.url);
    if (!hasMan) script = script.replace(/^man .*$/gm, ': man not installed');
    const run = await runTool(t, 'bash', ['-e', '-o', 'pipefail', '-c', `cd "$HOME"\n${script}`], { env });
    assert.equal(run.code, 0, `${block}\nexit ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`);
  }
});
