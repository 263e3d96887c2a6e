/**
 * The curl walk-through of docs/curl.md runs as written. Each ```console block runs in bash, in
 * order, against one server (the sign-in page's block against one started
 * with --login-page, as it says), with 127.0.0.1:8080 replaced by the test
 * server's address and $PW set to the admin password. For each `$` command
 * the test checks what its transcript shows and does not vary from run to
 * run: the status line, the Location, Content-Location, ETag, Allow and
 * WWW-Authenticate fields, and a body that holds no time or token.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ADMIN_PASSWORD, AS_SHIPPED, startTestServer, tempDir } from './helpers.js';
import { runTool } from './processes.js';

const PAGE = fileURLToPath(new URL('../docs/curl.md', import.meta.url));
const CHECKED_FIELDS = /^(location|content-location|etag|allow|www-authenticate):/i;

interface Command {
  text: string;
  expected: string[];
}

/**
 * The `$` commands of each console block, continuation lines joined, with the lines the transcript shows after each.
 */
function transcripts(): Command[][] {
  const blocks = [...readFileSync(PAGE, 'utf8').matchAll(/^```console\n([\s\S]*?)^```$/gm)].map((m) =>
    m[1]!.split('\n'),
  );
  return blocks.map((lines) => {
    const commands: Command[] = [];
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!;
      if (line.startsWith('$ ')) {
        let text = line.slice(2);
        while (text.endsWith('\\') && i + 1 < lines.length) text = `${text.slice(0, -1)} ${lines[++i]!.trim()}`;
        commands.push({ text, expected: [] });
      } else if (commands.length > 0) commands.at(-1)!.expected.push(line);
    }
    return commands;
  });
}

/** A body line worth comparing: JSON, with no time and no token in it. */
function stableBody(lines: string[]): string | undefined {
  const last = lines.filter((l) => l.trim() !== '').at(-1);
  if (last === undefined || !/^[{["]/.test(last)) return undefined;
  return /\d{4}-\d\d-\d\dT|ust_|"expiresAt"/.test(last) ? undefined : last;
}

test("docs/curl.md's walk-through runs as written: every status line, Location, ETag, Allow and challenge, and every stable body, as shown", async (t) => {
  for (const tool of ['bash', 'curl', 'jq']) {
    if ((await runTool(t, 'sh', ['-c', `command -v ${tool}`])).code !== 0) return t.skip(`${tool} not found`);
  }
  const main = await startTestServer(t, AS_SHIPPED);
  const signIn = await startTestServer(t, { ...AS_SHIPPED, loginPage: true });
  const cwd = tempDir(t);
  for (const block of transcripts()) {
    const url = block.some((c) => c.text.includes('--login-page')) ? signIn.url : main.url;
    const script = block
      .map((c, i) => `printf '\\n@@@${i}\\n'\n${c.text.replaceAll('http://127.0.0.1:8080', url)}`)
      .join('\n');
    const run = await runTool(t, 'bash', ['-c', `cd "${cwd}"\n${script}`], {
      env: { ...process.env, PW: ADMIN_PASSWORD },
    });
    const outputs = run.stdout.split(/\n@@@\d+\n/).slice(1);
    block.forEach((command, i) => {
      const actual = (outputs[i] ?? '').replaceAll('\r', '').split('\n');
      const where = `docs/curl.md: $ ${command.text}\n--- got:\n${actual.join('\n')}`;
      const status = command.expected.find((l) => /^HTTP\/1\.1 \d{3}/.test(l));
      if (status !== undefined)
        assert.ok(
          actual.some((l) => l.startsWith(status.slice(0, 12))),
          `${where}\n--- expected ${status}`,
        );
      for (const field of command.expected.filter((l) => CHECKED_FIELDS.test(l))) {
        assert.ok(
          actual.some((l) => l.toLowerCase() === field.toLowerCase()),
          `${where}\n--- expected the field ${field}`,
        );
      }
      const body = stableBody(command.expected);
      if (body !== undefined) assert.equal(actual.filter((l) => l.trim() !== '').at(-1), body, where);
    });
  }
});
