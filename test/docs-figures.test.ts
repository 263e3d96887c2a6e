/**
 * Figures the README and docs/ give in several places (intervals,
 * defaults, limits) checked against the one constant each comes from, so
 * that no page drifts from the code or from another page.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { FLAGS } from '../server/ops/config.js';
import { ACCOUNTS_POLL_MS, DATABASE_POLL_MS } from '../server/security/accounts-file.js';
import { INSTANCE_GONE_MS } from '../server/store/store.js';
import { CONNECT_TIMEOUT_SECONDS } from '../server/store/postgres/driver.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((n) => n.endsWith('.md'))
    .map((n) => `docs/${n}`),
];

/** Every page's paragraphs (lines joined up to a blank line), with where each starts. */
function paragraphs(): { where: string; text: string }[] {
  const out: { where: string; text: string }[] = [];
  for (const page of PAGES) {
    const lines = readFileSync(join(ROOT, page), 'utf8').split('\n');
    let start = 0;
    for (let i = 0; i <= lines.length; i++) {
      if (i === lines.length || lines[i]!.trim() === '') {
        if (i > start)
          out.push({ where: `${page}:${start + 1}`, text: lines.slice(start, i).join(' ').replace(/\s+/g, ' ') });
        start = i + 1;
      }
    }
  }
  return out;
}

test('docs: every interval at which the accounts are re-read is the one the code polls at (the file, the database)', () => {
  const allowed = new Set([`${ACCOUNTS_POLL_MS} ms`, `${DATABASE_POLL_MS} ms`]);
  let seen = 0;
  for (const { where, text } of paragraphs()) {
    if (!/account/i.test(text)) continue;
    for (const m of text.matchAll(/(?:re-read|looks at|polled|reads?)\b[^.]*?every (\d[\d,]* ms|second|\d+ s)\b/g)) {
      seen++;
      assert.ok(
        allowed.has(m[1]!),
        `${where}: "${m[0]}" says every ${m[1]}; the code polls every ${[...allowed].join(' or ')}`,
      );
    }
  }
  assert.ok(seen >= 3, `only ${seen} mentions found: the pattern no longer finds them`);
});

test('docs: the flag table of docs/configuration.md gives each flag the default the code has', () => {
  const readme = readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8');
  let rows = 0;
  for (const [name, spec] of Object.entries(FLAGS)) {
    const row = readme.split('\n').find((l) => l.startsWith(`| \`--${name}`) && /\| `USERS_/.test(l));
    if (row === undefined || spec.type === 'boolean' || spec.default === '') continue;
    rows++;
    const cell = row.split('|')[3]!.trim();
    assert.ok(
      cell.startsWith(`\`${String(spec.default)}\``),
      `--${name}: docs/configuration.md says ${cell}, the code's default is ${String(spec.default)}`,
    );
  }
  assert.ok(rows >= 10, `only ${rows} rows found`);
});

test("docs: the PostgreSQL figures (a new connection's limit, when a killed instance counts as gone) are the code's", () => {
  const scaling = paragraphs().filter((p) => p.where.startsWith('docs/'));
  const connect = scaling.filter((p) => /new connection must open within/.test(p.text));
  assert.ok(connect.length > 0);
  for (const p of connect) assert.match(p.text, new RegExp(`within ${CONNECT_TIMEOUT_SECONDS} s`), p.where);
  const gone = scaling.filter((p) => /counts as gone/.test(p.text));
  assert.ok(gone.length > 0, 'no page says when a killed instance counts as gone');
  for (const p of gone) assert.match(p.text, new RegExp(`gone ${INSTANCE_GONE_MS / 1000} s`), p.where);
});

test('docs: no heading of the README or docs/ reads as history (an issue number, a session, a date, a re-run)', () => {
  const history =
    /\bissue \d+|\bsession\)|\b(first|second|third) session\b|\b20\d\d-\d\d-\d\d\b|\bhistory\b|\bre-run\b|\bre-measured\b/i;
  for (const page of PAGES) {
    readFileSync(join(ROOT, page), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (/^#{1,6} /.test(line))
          assert.doesNotMatch(
            line,
            history,
            `${page}:${i + 1}: "${line}" tells how the product came to be, not what it is`,
          );
      });
  }
});
