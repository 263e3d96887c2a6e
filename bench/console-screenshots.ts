/**
 * The screenshots of docs/console.md, taken from a real run: the built
 * users-server (memory store, two declared fields) with a few users, and the console in
 * headless Chromium. Writes docs/console-*.png.
 *
 * Run: node --import tsx bench/console-screenshots.ts (needs dist/: `npm run build`, and /usr/bin/chromium).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Page } from 'playwright-core';
import { writeDeclarationsFile } from '../server/store/declarations-file.js';
import { ADMIN_PASSWORD, LOAD_FLAGS, ROOT, spawnServer } from './store-bench.js';

const PEOPLE: [string, string, string, number][] = [
  ['Ada Lovelace', 'ada', 'engineering', 36],
  ['Grace Hopper', 'grace', 'engineering', 85],
  ['Alan Turing', 'alan', 'research', 41],
  ['Katherine Johnson', 'katherine', 'research', 101],
  ['Edsger Dijkstra', 'edsger', 'engineering', 72],
  ['Barbara Liskov', 'barbara', 'research', 84],
  ['Ken Thompson', 'ken', 'operations', 81],
  ['Margaret Hamilton', 'margaret', 'engineering', 88],
  ['Dennis Ritchie', 'dennis', 'operations', 70],
  ['Frances Allen', 'frances', 'research', 88],
];

// email and team declared (users-server index add), so the table shows them.
const data = mkdtempSync(join(tmpdir(), 'console-screenshots-'));
writeDeclarationsFile(data, [
  { path: 'email', unique: true, caseInsensitive: true },
  { path: 'team', unique: false, caseInsensitive: false },
]);
const server = await spawnServer(['--port', '0', '--store', 'memory', '--data', data, ...LOAD_FLAGS], {
  env: { USERS_REQUIRE_SESSION: 'all', USERS_PASSWORD_COST: '10' },
});
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox'] });
const shot = (page: Page, name: string) => page.screenshot({ path: join(ROOT, 'docs', `console-${name}.png`) });

try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
  const page = await context.newPage();
  await page.goto(`${server.url}/console`);
  await page.getByLabel('User name').fill('admin');
  await shot(page, 'sign-in');
  await page.getByLabel('Password').fill(ADMIN_PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('table').waitFor();
  for (const [name, alias, team, age] of PEOPLE) {
    const body = JSON.stringify({ name, team, age, email: `${alias}@example.org` });
    await page.evaluate(
      `fetch('users/${alias}', { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: ${JSON.stringify(body)} })`,
    );
  }
  await page.getByRole('link', { name: 'Frances Allen' }).waitFor();
  await page.reload();
  await page.getByRole('link', { name: 'Frances Allen' }).waitFor();
  await shot(page, 'users');

  await page.getByRole('searchbox', { name: 'Filter' }).fill('team eq "research" and age gt');
  await page.getByRole('alert').waitFor();
  await shot(page, 'filter-error');

  await page.goto(`${server.url}/console#/users/1`);
  await page.getByLabel('Name', { exact: true }).waitFor();
  await page.getByLabel('team').fill('analytical engines');
  // Someone else changes the user meanwhile: Save shows both versions.
  await page.evaluate(
    `fetch('users/1', { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'Augusta Ada King', team: 'engineering', age: 36, email: 'ada@example.org', id: 1 }) })`,
  );
  await page.getByText('while you were editing').waitFor();
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByRole('region', { name: 'Someone else changed this user' }).waitFor();
  await page.screenshot({ path: join(ROOT, 'docs', 'console-conflict.png'), fullPage: true });

  await page.goto(`${server.url}/console#/tokens`);
  await page.getByLabel('Token name').fill('nightly-export');
  await page.getByRole('button', { name: 'Create token' }).click();
  await page.getByLabel('Secret').waitFor();
  await shot(page, 'tokens');

  await page.goto(`${server.url}/console#/status`);
  await page.locator('dl.figures dd', { hasText: /^\d+\.\d$/ }).waitFor();
  await shot(page, 'status');

  const dark = await browser.newContext({ viewport: { width: 375, height: 740 }, colorScheme: 'dark' });
  const phone = await dark.newPage();
  await phone.goto(`${server.url}/console`);
  await phone.getByLabel('User name').fill('admin');
  await phone.getByLabel('Password').fill(ADMIN_PASSWORD);
  await phone.getByRole('button', { name: 'Sign in' }).click();
  await phone.getByRole('link', { name: 'Frances Allen' }).waitFor();
  await shot(phone, 'phone-dark');
  console.log('wrote docs/console-*.png');
} finally {
  await browser.close();
  await server.stop();
  rmSync(data, { recursive: true, force: true });
}
