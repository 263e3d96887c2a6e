/**
 * The console's speed with many users (docs/console.md, "How fast"):
 *
 *  a. the first page of the table: ms from the start of the page's load
 *     (navigation start) to the first 100 rows in the table, signed in, on
 *     a journal of 1,000,000 users;
 *  b. the next page as the person scrolls: ms from the scroll to the next
 *     100 rows;
 *  c. a change made elsewhere (a PUT through the API) until the console's
 *     table shows it, through the feed of changes.
 *
 * Run: node --import tsx bench/console-bench.ts [--users 1000000] [--rounds 5]
 * (needs dist/: `npm run build`, and /usr/bin/chromium).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { chromium, type Page } from 'playwright-core';
import { ADMIN_PASSWORD, buildJournalDir, fmt, LOAD_FLAGS, median, spawnServer } from './store-bench.js';

const { values } = parseArgs({
  options: { users: { type: 'string', default: '1000000' }, rounds: { type: 'string', default: '5' } },
});
const users = Number(values.users);
const rounds = Number(values.rounds);

/** The start times of the console's `users-page` marks (one per page in the table), ms since navigation start. */
function pageMarks(page: Page): Promise<number[]> {
  return page.evaluate<number[]>(`performance.getEntriesByName('users-page').map((m) => m.startTime)`);
}

/** Resolves once the page holds `count` marks; returns their times. */
async function marksReach(page: Page, count: number): Promise<number[]> {
  for (;;) {
    const marks = await pageMarks(page);
    if (marks.length >= count) return marks;
    await page.waitForTimeout(5);
  }
}

const dir = mkdtempSync(join(tmpdir(), 'console-bench-'));
try {
  console.log(`building a journal of ${users.toLocaleString('en')} users`);
  buildJournalDir(dir, users);
  const server = await spawnServer(['--port', '0', '--data', dir, '--require-session', 'all', ...LOAD_FLAGS], {
    env: { USERS_PASSWORD_COST: '10' },
  });
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox'] });
  try {
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    await page.goto(`${server.url}/console`);
    await page.getByLabel('User name').fill('admin');
    await page.getByLabel('Password').fill(ADMIN_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('table').waitFor();

    const first: number[] = [];
    const next: number[] = [];
    const live: number[] = [];
    for (let round = 1; round <= rounds; round++) {
      await page.reload();
      const [shown] = await marksReach(page, 1);
      first.push(shown!);
      const scrolled = await page.evaluate<number>(
        `(() => { document.querySelector('button.more').scrollIntoView(); return performance.now(); })()`,
      );
      const marks = await marksReach(page, 2);
      next.push(marks[1]! - scrolled);
      // A change of a user in the first page, timed from just before the PUT to the row's new text.
      const name = `Changed ${round}`;
      const seen = page.evaluate<number>(`new Promise((resolve) => {
        const check = () => { if (document.querySelector('table.users tbody tr[data-id="${round}"] a')?.textContent === '${name}') { observer.disconnect(); resolve(Date.now()); } };
        const observer = new MutationObserver(check);
        observer.observe(document.querySelector('table.users tbody'), { subtree: true, childList: true, characterData: true });
      })`);
      const sent = Date.now();
      const status = await page.evaluate<number>(
        `fetch('users/${round}', { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: '${name}' }) }).then((r) => r.status)`,
      );
      if (status !== 200) throw new Error(`PUT answered ${status}`);
      live.push((await seen) - sent);
      console.log(
        `  round ${round}: first page ${fmt(shown!, 0)} ms after navigation start, next page ${fmt(next.at(-1)!, 0)} ms after the scroll, a change shown ${fmt(live.at(-1)!, 0)} ms after its PUT`,
      );
    }
    console.log(
      `median of ${rounds}: first page ${fmt(median(first), 0)} ms (target < 300), next page ${fmt(median(next), 0)} ms, change shown ${fmt(median(live), 0)} ms (target < 1000)`,
    );
  } finally {
    await browser.close();
    await server.stop();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
