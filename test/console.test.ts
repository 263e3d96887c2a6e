/**
 * The admin console (docs/console.md) in a real headless Chromium driven by
 * playwright-core, through accessible roles and names as a screen reader
 * sees the page: sign-in and sign-out in every --require-session mode, the
 * table (pages, sort, filter, count, the declared columns), a user's page
 * (Save with If-Match, the 412 with both versions, Delete, New user, a
 * unique-field conflict), live changes from the feed (also after a cut
 * connection, on the journal, and across two instances on PostgreSQL), API tokens, the
 * status, a reader's console, a user whose name is markup, keyboard use,
 * 375 and 1440 px wide, behind a proxy's path prefix, over TLS with
 * --cookie-secure, and an axe-core audit of every page, light and dark.
 *
 * Needs Debian's chromium at /usr/bin/chromium; without it the tests skip
 * and say why (the PostgreSQL test also without PostgreSQL, the TLS test
 * without openssl).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test, type TestContext } from 'node:test';
import { chromium, type Browser, type BrowserContext, type Page, type Request } from 'playwright-core';
import { writeDeclarationsFile } from '../server/store/declarations-file.js';
import { PROBLEM_CONTENT_TYPE } from '../shared/problems.js';
import {
  ADMIN_PASSWORD,
  basic,
  buildIfStale,
  put,
  send,
  startTestServer,
  tempDir,
  type TestServer,
} from './helpers.js';
import { postgresSkipReason, testDatabase } from './postgres.js';

const CHROMIUM = '/usr/bin/chromium';
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const READER = { name: 'rita', role: 'reader' as const, password: 'rita-reads-only-1' };

let skipReason: string | undefined;
let browser: Browser | undefined;

before(async () => {
  if (!existsSync(CHROMIUM)) skipReason = `${CHROMIUM} is missing (Debian: apt-get install chromium)`;
  skipReason ??= buildIfStale();
  if (skipReason !== undefined) {
    console.log(`# console tests skipped: ${skipReason}`);
    return;
  }
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'],
  });
});

after(async () => {
  await browser?.close();
});

interface Opened {
  context: BrowserContext;
  page: Page;
  /** What the page's Content-Security-Policy refused, and errors its script threw. */
  problems: string[];
}

/**
 * Holds the answer to the first request of `page` that `matches`: it is fetched from the server at once (`fetched`
 * resolves then) and reaches the page only once `release` is called. Later requests go through; one the server can no
 * longer answer (the test has ended) fails as it would.
 */
async function holdFirstAnswer(
  page: Page,
  matches: (url: URL) => boolean,
): Promise<{ fetched: Promise<Request>; release: () => void }> {
  let release!: () => void;
  let fetched!: (request: Request) => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const first = new Promise<Request>((resolve) => (fetched = resolve));
  let held = false;
  await page.route(matches, async (route) => {
    if (held) return route.continue().catch(() => {});
    held = true;
    try {
      const response = await route.fetch();
      fetched(route.request());
      await released;
      await route.fulfill({ response });
    } catch {
      await route.abort().catch(() => {});
    }
  });
  return { fetched: first, release };
}

/** A fresh browser profile and page, closed after the test; undefined when skipping. */
async function open(t: TestContext, options: Parameters<Browser['newContext']>[0] = {}): Promise<Opened | undefined> {
  if (skipReason !== undefined || browser === undefined) {
    t.skip(skipReason ?? 'no browser');
    return undefined;
  }
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 }, ...options });
  t.after(() => context.close());
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (message) => {
    if (/Content Security Policy|Trusted Type/i.test(message.text())) problems.push(message.text());
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  return { context, page, problems };
}

/** Opens `url` (the console) and signs in with the console's form. */
async function signIn(page: Page, url: string, user = 'admin', password = ADMIN_PASSWORD): Promise<void> {
  await page.goto(url);
  await page.getByLabel('User name').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

/** A console signed in as `user` on `server`, on the users table once its first page shows. */
async function consoleOf(
  t: TestContext,
  server: { url: string },
  user = 'admin',
  password = ADMIN_PASSWORD,
  options: Parameters<Browser['newContext']>[0] = {},
): Promise<Opened | undefined> {
  const opened = await open(t, options);
  if (opened === undefined) return undefined;
  await signIn(opened.page, `${server.url}/console`, user, password);
  await opened.page
    .getByRole('status')
    .filter({ hasText: /users?$|matches?$/ })
    .first()
    .waitFor();
  return opened;
}

/**
 * Waits until `condition` (an expression evaluated in the page) holds,
 * checked at each change of the document: page.waitForFunction would
 * compile it with eval, which the console's policy forbids.
 */
async function until(page: Page, condition: string): Promise<void> {
  const held = await page.evaluate<boolean>(`new Promise((resolve) => {
    const check = () => { if (${condition}) { observer.disconnect(); clearTimeout(timer); resolve(true); } };
    const observer = new MutationObserver(check);
    const timer = setTimeout(() => { observer.disconnect(); resolve(false); }, 30000);
    observer.observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
    check();
  })`);
  assert.ok(held, `the page never came to ${condition}`);
}

/** The texts of a column's cells, top to bottom. */
function column(page: Page, index: number): Promise<string[]> {
  return page.locator(`table.users tbody tr td:nth-child(${index})`).allTextContents();
}

/**
 * Creates users through the API as admin: `count` of them, `make(i)` each body, through alias `prefix-i` when given.
 */
async function seed(server: TestServer, count: number, make: (i: number) => object, prefix?: string): Promise<void> {
  const cookie = await server.login();
  for (let i = 1; i <= count; i++) {
    const reply =
      prefix === undefined
        ? await send(server.url, 'POST', '/users/new', { json: make(i), headers: { cookie } })
        : await put(server.url, `/users/${prefix}-${i}`, make(i), { cookie });
    assert.equal(reply.status, 201, reply.text);
  }
}

/** The serious and critical violations of an axe-core audit of the page as it is. */
async function audit(page: Page, where: string): Promise<void> {
  // Once a document: a navigation to another #route keeps it.
  if (!(await page.evaluate<boolean>("typeof axe === 'object'"))) await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate<{ id: string; impact: string; help: string; nodes: number }[]>(
    `axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')).join(' | ') })))`,
  );
  const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert.deepEqual(serious, [], `${where}: axe-core finds ${JSON.stringify(serious, null, 1)}`);
}

/** Whether the page scrolls sideways at its current width. */
function scrollsSideways(page: Page): Promise<boolean> {
  return page.evaluate<boolean>('document.documentElement.scrollWidth > document.documentElement.clientWidth');
}

/**
 * Three tests at once, each with its own server and browser context: most
 * of a test's time is the browser and the server waiting on each other.
 */
const CONCURRENT_TESTS = 3;

describe('console', { concurrency: CONCURRENT_TESTS }, () => {
  // ------------------------------------------------------------ serving and signing in

  for (const requireSession of ['all', 'writes', 'none'] as const) {
    test(`Console, --require-session ${requireSession}: /console asks to sign in; the form signs in through POST /login (no --login-page), the session stays in its HttpOnly cookie, and Sign out ends it on the server`, async (t) => {
      const server = await startTestServer(t, { requireSession });
      await seed(server, 3, (i) => ({ name: `Person ${i}` }));
      const opened = await open(t);
      if (opened === undefined) return;
      const { context, page, problems } = opened;
      const cdp = await context.newCDPSession(page);
      let dialogs = 0;
      await cdp.send('Fetch.enable', { handleAuthRequests: true, patterns: [{ urlPattern: '*' }] });
      // A request the page's closing cut short cannot be continued: nothing to do then.
      const ignore = () => {};
      cdp.on(
        'Fetch.requestPaused',
        (e) => void cdp.send('Fetch.continueRequest', { requestId: e.requestId }).catch(ignore),
      );
      cdp.on('Fetch.authRequired', (e) => {
        dialogs++;
        void cdp
          .send('Fetch.continueWithAuth', { requestId: e.requestId, authChallengeResponse: { response: 'CancelAuth' } })
          .catch(ignore);
      });

      await page.goto(`${server.url}/console`);
      assert.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Sign in');
      await page.getByLabel('User name').fill('admin');
      await page.getByLabel('Password').fill('not-the-password');
      await page.getByRole('button', { name: 'Sign in' }).click();
      assert.equal(await page.getByRole('alert').textContent(), 'The user name or password is wrong.');
      assert.equal(dialogs, 0, "the browser's own password dialog was not asked for");

      await page.getByLabel('Password').fill(ADMIN_PASSWORD);
      await page.getByRole('button', { name: 'Sign in' }).click();
      // The table's status names the count once its first page is in.
      await page
        .getByRole('status')
        .filter({ hasText: /users?$|matches?$/ })
        .first()
        .waitFor();
      assert.deepEqual(await column(page, 3), ['Person 1', 'Person 2', 'Person 3']);
      assert.match((await page.locator('header').textContent()) ?? '', /admin \(admin\)/);
      const cookie = (await context.cookies()).find((c) => c.name === 'USER_TOKEN');
      assert.ok(cookie !== undefined && cookie.httpOnly, 'the session is an HttpOnly cookie');
      assert.ok(!(await page.evaluate<string>('document.cookie')).includes('USER_TOKEN'));

      await page.reload();
      await page.getByRole('button', { name: 'Sign out' }).waitFor();
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('button', { name: 'Sign in' }).waitFor();
      const saved = await send(server.url, 'GET', '/', { headers: { cookie: `USER_TOKEN=${cookie.value}` } });
      assert.equal(saved.status, 401, 'a saved copy of the cookie no longer signs in: the session was revoked');
      assert.deepEqual(problems, []);
    });
  }

  test('Console: with --no-console, /console is 404 and no console is served', async (t) => {
    const server = await startTestServer(t, { noConsole: true });
    const opened = await open(t);
    if (opened === undefined) return;
    const answer = await opened.page.goto(`${server.url}/console`);
    assert.equal(answer?.status(), 404);
  });

  // ------------------------------------------------------------ the table

  test('Console table: id, alias and name columns, a page at a time as the person scrolls or asks for more, the count of users', async (t) => {
    const server = await startTestServer(t);
    await seed(server, 230, (i) => ({ name: `Person ${String(i).padStart(3, '0')}` }), 'p');
    const opened = await consoleOf(t, server);
    if (opened === undefined) return;
    const { page } = opened;
    assert.deepEqual(await page.getByRole('columnheader').allTextContents(), ['id', 'alias', 'name']);
    assert.equal(await page.getByRole('status').filter({ hasText: 'users' }).textContent(), '230 users');
    assert.equal((await column(page, 1)).length, 100);
    assert.deepEqual((await column(page, 2)).slice(0, 2), ['p-1', 'p-2']);
    // Scrolling to the end loads the next page, and again the one after.
    const more = page.getByRole('button', { name: 'Load more' });
    await more.scrollIntoViewIfNeeded();
    await until(page, `document.querySelectorAll('table.users tbody tr').length >= 200`);
    await more.scrollIntoViewIfNeeded();
    await until(page, `document.querySelectorAll('table.users tbody tr').length === 230`);
    assert.equal(await more.isHidden(), true, 'nothing more to load');
    const ids = (await column(page, 1)).map(Number);
    assert.deepEqual(
      ids,
      Array.from({ length: 230 }, (_, i) => i + 1),
      'every user once, in id order',
    );
  });

  test('Console table: a column header sorts through the server (aria-sort ascending, then descending); id order is the default', async (t) => {
    const server = await startTestServer(t);
    await seed(server, 5, (i) => ({ name: ['Eve', 'Bob', 'Dan', 'Ann', 'Cat'][i - 1]! }));
    const opened = await consoleOf(t, server);
    if (opened === undefined) return;
    const { page } = opened;
    const idHeader = page.getByRole('columnheader', { name: 'id' });
    const nameHeader = page.getByRole('columnheader', { name: 'name' });
    assert.equal(await idHeader.getAttribute('aria-sort'), 'ascending');
    assert.equal(await nameHeader.getAttribute('aria-sort'), 'none');
    const sorted = page.waitForRequest((r) => r.url().includes('sort=name'));
    await nameHeader.getByRole('button').click();
    await sorted;
    await until(page, `document.querySelector('table.users tbody td:nth-child(3)')?.textContent === 'Ann'`);
    assert.deepEqual(await column(page, 3), ['Ann', 'Bob', 'Cat', 'Dan', 'Eve']);
    assert.equal(await nameHeader.getAttribute('aria-sort'), 'ascending');
    assert.equal(await idHeader.getAttribute('aria-sort'), 'none');
    await nameHeader.getByRole('button').click();
    await until(page, `document.querySelector('table.users tbody td:nth-child(3)')?.textContent === 'Eve'`);
    assert.deepEqual(await column(page, 3), ['Eve', 'Dan', 'Cat', 'Bob', 'Ann']);
    assert.equal(await nameHeader.getAttribute('aria-sort'), 'descending');
    assert.match(page.url(), /#\/users\?sort=-name$/, 'the address keeps the sort');
    await page.reload();
    await until(page, `document.querySelector('table.users tbody td:nth-child(3)')?.textContent === 'Eve'`);
  });

  test('Console filter: plain words search the name (and the declared paths) with co, the filter syntax goes as written, the count says how many match, and a malformed filter is explained with its column', async (t) => {
    const server = await startTestServer(t);
    await seed(
      server,
      6,
      (i) => ({
        name: ['Ann Lee', 'Bob Lee', 'Cat Ray', 'Dan Ray', 'Eve Lee', 'Fay Oh'][i - 1]!,
        team: i % 2 ? 'red' : 'blue',
      }),
      'u',
    );
    const opened = await consoleOf(t, server);
    if (opened === undefined) return;
    const { page } = opened;
    const filter = page.getByRole('searchbox', { name: 'Filter' });
    const count = page.getByRole('status').filter({ hasText: /match|users/ });

    const words = page.waitForRequest((r) => r.url().includes('filter=') && !r.url().includes('count=true'));
    await filter.fill('Lee');
    assert.equal(new URL((await words).url()).searchParams.get('filter'), 'name co "Lee"');
    await until(page, `document.querySelectorAll('table.users tbody tr').length === 3`);
    await count.filter({ hasText: '3 matches' }).waitFor();
    assert.deepEqual(await column(page, 3), ['Ann Lee', 'Bob Lee', 'Eve Lee']);

    await filter.fill('Lee Ann');
    await until(page, `document.querySelectorAll('table.users tbody tr').length === 1`);
    await count.filter({ hasText: '1 match' }).waitFor();

    await filter.fill('team eq "blue"');
    await filter.press('Enter');
    await until(page, `document.querySelectorAll('table.users tbody tr').length === 3`);
    assert.deepEqual(await column(page, 3), ['Bob Lee', 'Dan Ray', 'Fay Oh']);

    // An alias names its user, who comes first.
    await filter.fill('u-4');
    await until(page, `document.querySelector('table.users tbody td:nth-child(3)')?.textContent === 'Dan Ray'`);

    await filter.fill('team eq blue');
    await filter.press('Enter');
    const alert = page.getByRole('alert').filter({ hasText: 'column' });
    await alert.waitFor();
    assert.match((await alert.textContent()) ?? '', /The filter does not parse at column 9: expected a value/);
    assert.equal(await filter.getAttribute('aria-invalid'), 'true');
    assert.equal(await page.locator('table.users tbody tr').count(), 0, 'a refused filter lists no user');

    await filter.fill('');
    await filter.press('Enter');
    await count.filter({ hasText: '6 users' }).waitFor();
    assert.equal(await alert.count(), 0, 'the explanation goes with the filter');
  });

  test('Console table: a column for each path the server declares (GET /indexes), searched by plain words too; a server without /indexes (404) shows none', async (t) => {
    const data = tempDir(t);
    writeDeclarationsFile(data, [
      { path: 'address.city', unique: false, caseInsensitive: false },
      { path: 'email', unique: true, caseInsensitive: true },
    ]);
    const server = await startTestServer(t, { data });
    await seed(server, 3, (i) => ({
      name: `Person ${i}`,
      email: `p${i}@example.org`,
      address: { city: ['Oslo', 'Rome', 'Lima'][i - 1] },
    }));
    const opened = await consoleOf(t, server);
    if (opened === undefined) return;
    const { page } = opened;
    await page.getByRole('columnheader', { name: 'email' }).waitFor();
    assert.deepEqual(await page.getByRole('columnheader').allTextContents(), [
      'id',
      'alias',
      'name',
      'address.city',
      'email',
    ]);
    assert.deepEqual(await column(page, 4), ['Oslo', 'Rome', 'Lima']);
    const words = page.waitForRequest((r) => r.url().includes('filter=') && !r.url().includes('count=true'));
    await page.getByRole('searchbox', { name: 'Filter' }).fill('Rome');
    assert.equal(
      new URL((await words).url()).searchParams.get('filter'),
      '(name co "Rome" or address.city co "Rome" or email co "Rome")',
    );
    await until(page, `document.querySelectorAll('table.users tbody tr').length === 1`);
    assert.deepEqual(await column(page, 5), ['p2@example.org']);
    // A sort on a declared path goes to the server like any other.
    await page.getByRole('searchbox', { name: 'Filter' }).fill('');
    await page.getByRole('searchbox', { name: 'Filter' }).press('Enter');
    await until(page, `document.querySelectorAll('table.users tbody tr').length === 3`);
    await page.getByRole('columnheader', { name: 'address.city' }).getByRole('button').click();
    await until(page, `document.querySelector('table.users tbody td:nth-child(4)')?.textContent === 'Lima'`);
    assert.deepEqual(await column(page, 4), ['Lima', 'Oslo', 'Rome']);

    // A server that has no /indexes (an older one) declares nothing: no extra column.
    const older = await open(t);
    if (older === undefined) return;
    await older.page.route('**/indexes', (route) =>
      route.fulfill({ status: 404, contentType: PROBLEM_CONTENT_TYPE, body: '{"status":404}' }),
    );
    await signIn(older.page, `${server.url}/console`);
    await older.page.locator('table.users tbody tr').first().waitFor();
    assert.deepEqual(await older.page.getByRole('columnheader').allTextContents(), ['id', 'alias', 'name']);
  });

  // ------------------------------------------------------------ a user's page

  test("Console user page: the fields as a form (Name) and the whole JSON as text; Save sends If-Match; a change made meanwhile (412) shows both versions, and re-applying keeps both people's changes", async (t) => {
    const server = await startTestServer(t, { store: 'journal' });
    await seed(server, 1, () => ({ name: 'Ann', team: 'red', age: 41 }), 'ann');
    const opened = await consoleOf(t, server);
    if (opened === undefined) return;
    const { page } = opened;
    await page.getByRole('link', { name: 'Ann' }).click();
    const name = page.getByLabel('Name', { exact: true });
    await name.waitFor();
    assert.equal(await name.inputValue(), 'Ann');
    assert.deepEqual(JSON.parse(await page.getByLabel('JSON').inputValue()), {
      name: 'Ann',
      team: 'red',
      age: 41,
      id: 1,
    });
    assert.match((await page.getByRole('heading', { level: 1 }).textContent()) ?? '', /alias ann-1/);

    await name.fill('Ann Lee');
    assert.equal(JSON.parse(await page.getByLabel('JSON').inputValue()).name, 'Ann Lee', 'the text follows the form');
    const etag = (await send(server.url, 'GET', '/users/1')).headers.etag;
    const saving = page.waitForRequest((r) => r.method() === 'PUT');
    await page.getByRole('button', { name: 'Save' }).click();
    assert.equal((await saving).headers()['if-match'], etag, 'Save sends If-Match with the tag it read');
    await page.getByText('Saved.', { exact: true }).first().waitFor();
    assert.equal((await send(server.url, 'GET', '/users/1')).json().name, 'Ann Lee');

    // The JSON text edits the form too.
    const json = page.getByLabel('JSON');
    await json.fill(JSON.stringify({ name: 'Ann Lee', team: 'green', age: 41, id: 1 }, null, 2));
    assert.equal(await page.getByLabel('team').inputValue(), 'green');

    // Someone else changes the user before this Save: the page shows both and loses neither.
    const cookie = await server.login();
    assert.equal(
      (await put(server.url, '/users/1', { name: 'Ann Lee', team: 'red', age: 42 }, { cookie })).status,
      200,
    );
    await page.getByRole('button', { name: 'Save' }).click();
    const conflict = page.getByRole('region', { name: 'Someone else changed this user' });
    await conflict.waitFor();
    assert.match((await conflict.getByRole('figure').first().textContent()) ?? '', /"green"/);
    assert.match((await conflict.getByRole('figure').nth(1).textContent()) ?? '', /"age": 42/);
    assert.equal((await send(server.url, 'GET', '/users/1')).json().team, 'red', 'nothing was overwritten');
    await conflict.getByRole('button', { name: 'Re-apply my changes' }).click();
    assert.deepEqual(JSON.parse(await json.inputValue()), { name: 'Ann Lee', team: 'green', age: 42, id: 1 });
    // The first Save's "Saved." may still show: the PUT's answer is what says this one is done.
    const reapplied = page.waitForResponse((r) => r.request().method() === 'PUT' && r.ok());
    await page.getByRole('button', { name: 'Save' }).click();
    await reapplied;
    assert.deepEqual((await send(server.url, 'GET', '/users/1')).json(), {
      name: 'Ann Lee',
      team: 'green',
      age: 42,
      id: 1,
    });

    // Or the person takes the saved version. (Changed while this page is being edited: the page says so, and keeps the
    // edit.)
    await name.fill('Mine');
    assert.equal((await put(server.url, '/users/1', { name: 'Ann L.', id: 1 }, { cookie })).status, 200);
    await page.getByText('Someone else changed this user while you were editing.', { exact: false }).waitFor();
    assert.equal(await name.inputValue(), 'Mine');
    await page.getByRole('button', { name: 'Save' }).click();
    await conflict.getByRole('button', { name: 'Reload the saved version' }).click();
    assert.equal(await name.inputValue(), 'Ann L.');
  });

  test('Console user page: Delete asks first (Cancel keeps the user), then deletes; New user with and without an alias; an alias that is taken links its user', async (t) => {
    const server = await startTestServer(t);
    await seed(server, 1, () => ({ name: 'Ann' }), 'ann');
    const opened = await consoleOf(t, server);
    if (opened === undefined) return;
    const { page } = opened;
    await page.goto(`${server.url}/console#/users/1`);
    await page.getByRole('button', { name: 'Delete' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete this user?' });
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    assert.equal((await send(server.url, 'GET', '/users/1')).status, 200, 'Cancel deletes nothing');
    await page.getByRole('button', { name: 'Delete' }).click();
    const deleting = page.waitForRequest((r) => r.method() === 'DELETE');
    await dialog.getByRole('button', { name: 'Yes, delete' }).click();
    assert.match((await deleting).headers()['if-match'] ?? '', /^"/, 'the delete carries If-Match');
    await page.waitForURL(/#\/users$/);
    assert.equal((await send(server.url, 'GET', '/users/1')).status, 404);

    await page.getByRole('button', { name: 'New user' }).click();
    await page.getByLabel('Name').fill('Bob');
    await page.getByLabel('Alias (optional)').fill('bob');
    await page.getByLabel('More fields (JSON)').fill('{"team": "blue"}');
    await page.getByRole('button', { name: 'Create' }).click();
    await page.waitForURL(/#\/users\/2$/);
    assert.deepEqual((await send(server.url, 'GET', '/users/bob')).json(), { team: 'blue', name: 'Bob', id: 2 });

    await page.goto(`${server.url}/console#/new`);
    await page.getByLabel('Name').fill('Cat');
    await page.getByRole('button', { name: 'Create' }).click();
    await page.waitForURL(/#\/users\/3$/);
    assert.equal((await send(server.url, 'GET', '/users/3')).json().name, 'Cat');

    await page.goto(`${server.url}/console#/new`);
    await page.getByLabel('Name').fill('Another Bob');
    await page.getByLabel('Alias (optional)').fill('bob');
    await page.getByRole('button', { name: 'Create' }).click();
    const taken = page.getByRole('alert');
    await taken.getByRole('link', { name: 'user 2' }).waitFor();
    assert.equal(await taken.textContent(), 'The alias bob already names user 2.');
    assert.equal((await send(server.url, 'GET', '/users/bob')).json().name, 'Bob', 'nothing was overwritten');
  });

  test('Console: a unique-field conflict (409 unique-violation) names the field and links the user that holds the value', async (t) => {
    const data = tempDir(t);
    writeDeclarationsFile(data, [{ path: 'email', unique: true, caseInsensitive: true }]);
    const server = await startTestServer(t, { data });
    await seed(server, 2, (i) => ({ name: `Person ${i}`, email: `p${i}@example.org` }));
    const opened = await consoleOf(t, server);
    if (opened === undefined) return;
    const { page } = opened;
    await page.goto(`${server.url}/console#/users/1`);
    await page.getByLabel('email').fill('P2@example.org');
    await page.getByRole('button', { name: 'Save' }).click();
    const alert = page.getByRole('alert');
    await alert.getByRole('link', { name: 'user 2' }).waitFor();
    assert.equal(await alert.textContent(), 'Another user already holds this value of email, which is unique: user 2.');
    assert.equal(await page.getByLabel('email').getAttribute('aria-invalid'), 'true', 'the field is marked');
    assert.equal((await send(server.url, 'GET', '/users/1')).json().email, 'p1@example.org', 'nothing changed');
    // The same for a new user.
    await page.goto(`${server.url}/console#/new`);
    await page.getByLabel('Name').fill('Copycat');
    await page.getByLabel('More fields (JSON)').fill('{"email": "p1@EXAMPLE.org"}');
    await page.getByRole('button', { name: 'Create' }).click();
    await page.getByRole('alert').getByRole('link', { name: 'user 1' }).click();
    await page.waitForURL(/#\/users\/1$/);
    await page.getByLabel('Name', { exact: true }).waitFor();
    assert.equal(await page.getByLabel('Name', { exact: true }).inputValue(), 'Person 1');
  });

  // ------------------------------------------------------------ live

  test('Console live: a change made elsewhere shows in the table and on an open user without a reload; a deleted user is marked; after a cut connection the feed resumes (Last-Event-ID) and misses nothing', async (t) => {
    const server = await startTestServer(t, { store: 'journal', requireSession: 'all' });
    await seed(server, 2, (i) => ({ name: `Person ${i}` }));
    const table = await consoleOf(t, server);
    const user = await consoleOf(t, server);
    if (table === undefined || user === undefined) return;
    await user.page.goto(`${server.url}/console#/users/1`);
    await user.page.getByLabel('Name', { exact: true }).waitFor();
    await table.page.getByText('Live', { exact: true }).waitFor();
    await user.page.getByText('Live', { exact: true }).waitFor();
    const cookie = await server.login();

    assert.equal((await put(server.url, '/users/1', { name: 'Renamed' }, { cookie })).status, 200);
    await table.page.getByRole('link', { name: 'Renamed' }).waitFor();
    await until(user.page, `document.querySelector('#field-0')?.value === 'Renamed'`);
    assert.match(
      (await user.page.getByRole('status').filter({ hasText: 'changed' }).textContent()) ?? '',
      /Someone else changed this user/,
    );

    assert.equal(
      (await send(server.url, 'POST', '/users/new', { json: { name: 'Newcomer' }, headers: { cookie } })).status,
      201,
    );
    await table.page.getByRole('link', { name: 'Newcomer' }).waitFor();
    await table.page.getByRole('status').filter({ hasText: '3 users' }).waitFor();

    assert.equal((await send(server.url, 'DELETE', '/users/1', { headers: { cookie } })).status, 204);
    await table.page.locator('tr.deleted', { hasText: 'Renamed (deleted)' }).waitFor();
    await user.page.getByText('This user was deleted.').waitFor();
    assert.equal(await user.page.getByRole('button', { name: 'Save' }).isDisabled(), true);

    // Every connection cut: the browsers reconnect with Last-Event-ID and get what they missed.
    const resumed = table.page.waitForRequest((r) => r.url().endsWith('/changes'));
    server.running.server.closeAllConnections();
    assert.equal((await put(server.url, '/users/2', { name: 'After the cut' }, { cookie })).status, 200);
    assert.match(
      (await (await resumed).allHeaders())['last-event-id'] ?? '',
      /^\d+$/,
      'the reconnect names the last change seen',
    );
    await table.page.getByRole('link', { name: 'After the cut' }).waitFor();
  });

  test('Console live: a change that comes while a page of the table is on its way (read before the change) shows once the page is in', async (t) => {
    const server = await startTestServer(t, { requireSession: 'all' });
    await seed(server, 2, (i) => ({ name: `Person ${i}` }));
    const opened = await open(t);
    if (opened === undefined) return;
    const { page, problems } = opened;
    // Counts the changes the page's feed receives, before the console's own listeners hear them.
    await page.addInitScript(`{
      const Original = window.EventSource;
      window.feedPuts = 0;
      window.EventSource = class extends Original {
        constructor(...args) { super(...args); this.addEventListener('put', () => window.feedPuts++); }
      };
    }`);
    await signIn(page, `${server.url}/console`);
    await page.getByRole('link', { name: 'Person 2' }).waitFor();
    await page.getByText('Live', { exact: true }).waitFor();
    const cookie = await server.login();
    // The next page is read at once, and reaches the console only after the change was made and sent on the feed.
    const page2 = await holdFirstAnswer(
      page,
      (url) => url.pathname.endsWith('/users') && url.search !== '' && !url.searchParams.has('count'),
    );
    await page.getByRole('button', { name: 'name', exact: true }).click();
    await page2.fetched;
    assert.equal((await put(server.url, '/users/2', { name: 'Seen while loading' }, { cookie })).status, 200);
    await page.waitForFunction('window.feedPuts >= 1');
    page2.release();
    await page.getByRole('link', { name: 'Seen while loading' }).waitFor();
    assert.deepEqual(problems, []);
  });

  test('Console live: on the page of a user, a read answered after a newer one (the change the feed brought) does not bring the older version back', async (t) => {
    const server = await startTestServer(t, { requireSession: 'all' });
    await seed(server, 1, (i) => ({ name: `Person ${i}` }));
    const opened = await open(t);
    if (opened === undefined) return;
    const { page, problems } = opened;
    await signIn(page, `${server.url}/console`);
    await page.getByText('Live', { exact: true }).waitFor();
    const cookie = await server.login();
    // The page's first read of user 1 is answered only after a second read, which the change sets off, is shown.
    const firstRead = await holdFirstAnswer(page, (url) => url.pathname.endsWith('/users/1'));
    await page.getByRole('link', { name: 'Person 1' }).click();
    const first = await firstRead.fetched;
    const older = page.waitForEvent('requestfinished', (r) => r === first);
    assert.equal((await put(server.url, '/users/1', { name: 'Newer' }, { cookie })).status, 200);
    await until(page, `document.querySelector('#field-0')?.value === 'Newer'`);
    firstRead.release();
    await older;
    // One turn of the page's own tasks: what the older answer sets off has run by then.
    await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 0)));
    assert.equal(await page.locator('#field-0').inputValue(), 'Newer');
    assert.deepEqual(problems, []);
  });

  test('Console live on PostgreSQL: a change made through one instance shows in a console on another', async (t) => {
    const skip = postgresSkipReason();
    if (skip !== undefined) return t.skip(skip);
    const url = await testDatabase(t);
    const one = await startTestServer(t, { store: url, requireSession: 'all' });
    const two = await startTestServer(t, { store: url, requireSession: 'all' });
    await seed(one, 2, (i) => ({ name: `Person ${i}` }));
    const opened = await consoleOf(t, two);
    if (opened === undefined) return;
    const { page } = opened;
    await page.getByText('Live', { exact: true }).waitFor();
    assert.deepEqual(await column(page, 3), ['Person 1', 'Person 2']);
    const cookie = await one.login();
    assert.equal((await put(one.url, '/users/2', { name: 'Changed on one' }, { cookie })).status, 200);
    await page.getByRole('link', { name: 'Changed on one' }).waitFor();
    assert.equal((await send(one.url, 'DELETE', '/users/1', { headers: { cookie } })).status, 204);
    await page.locator('tr.deleted', { hasText: 'Person 1 (deleted)' }).waitFor();
    // And the console's own write on the second reaches the first.
    await page.goto(`${two.url}/console#/users/2`);
    await page.getByLabel('Name', { exact: true }).fill('Saved on two');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByText('Saved.', { exact: true }).first().waitFor();
    assert.equal((await send(one.url, 'GET', '/users/2', { headers: { cookie } })).json().name, 'Saved on two');
  });

  // ------------------------------------------------------------ tokens, status, readers

  test('Console tokens: an admin lists, creates (the secret shown once, copied with the Copy button) and revokes API tokens', async (t) => {
    const server = await startTestServer(t, { requireSession: 'all' });
    const opened = await consoleOf(t, server, 'admin', ADMIN_PASSWORD, {
      permissions: ['clipboard-read', 'clipboard-write'],
    });
    if (opened === undefined) return;
    const { page } = opened;
    await page.getByRole('link', { name: 'Tokens' }).click();
    await page.getByText('No API tokens yet.').waitFor();
    await page.getByLabel('Token name').fill('nightly');
    await page.getByLabel('Role').selectOption('reader');
    await page.getByRole('button', { name: 'Create token' }).click();
    const secret = page.getByLabel('Secret');
    await secret.waitFor();
    const token = await secret.inputValue();
    assert.match(token, /^ust_[0-9a-f]{16}\./);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByText('Copied.').waitFor();
    assert.equal(await page.evaluate<string>('navigator.clipboard.readText()'), token);
    assert.equal(
      (await send(server.url, 'GET', '/users', { headers: { authorization: `Bearer ${token}` } })).status,
      200,
    );
    await page.getByRole('cell', { name: 'nightly', exact: true }).waitFor();

    await page.reload();
    await page.getByRole('cell', { name: 'nightly', exact: true }).waitFor();
    assert.equal(await page.getByLabel('Secret').count(), 0, 'the secret is shown once');
    await page.getByRole('button', { name: 'Revoke nightly' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Yes, revoke' }).click();
    await page.getByText('No API tokens yet.').waitFor();
    assert.equal(
      (await send(server.url, 'GET', '/users', { headers: { authorization: `Bearer ${token}` } })).status,
      401,
    );
  });

  test("Console status: the store's readiness, the users, the uptime and requests per second, from /readyz and /metrics", async (t) => {
    const server = await startTestServer(t, { requireSession: 'all' });
    await seed(server, 4, (i) => ({ name: `Person ${i}` }));
    const opened = await consoleOf(t, server);
    if (opened === undefined) return;
    const { page } = opened;
    await page.getByRole('link', { name: 'Status' }).click();
    const figure = (term: string) =>
      page.locator('dl.figures div', { has: page.locator('dt', { hasText: term }) }).locator('dd');
    await figure('Store').filter({ hasText: 'Ready' }).waitFor();
    assert.equal(await figure('Users').textContent(), '4');
    assert.match((await figure('Uptime').textContent()) ?? '', /^\d+ (s|min)$/);
    await figure('Requests per second')
      .filter({ hasText: /^\d+\.\d$/ })
      .waitFor();
  });

  test('Console for a reader: everything shows, but Save, Delete and New user are disabled, inputs are read-only, and there is no Tokens link', async (t) => {
    const server = await startTestServer(t, { requireSession: 'all' }, { accounts: [READER] });
    await seed(server, 2, (i) => ({ name: `Person ${i}`, team: 'red' }));
    const opened = await consoleOf(t, server, READER.name, READER.password);
    if (opened === undefined) return;
    const { page } = opened;
    assert.deepEqual(await column(page, 3), ['Person 1', 'Person 2']);
    assert.equal(await page.getByRole('button', { name: 'New user' }).isDisabled(), true);
    assert.equal(await page.getByRole('link', { name: 'Tokens' }).count(), 0);
    assert.match((await page.locator('header').textContent()) ?? '', /rita \(reader\)/);
    await page.getByRole('link', { name: 'Person 1' }).click();
    await page.getByLabel('Name', { exact: true }).waitFor();
    assert.equal(await page.getByLabel('Name', { exact: true }).inputValue(), 'Person 1');
    assert.equal(await page.getByRole('button', { name: 'Save' }).isDisabled(), true);
    assert.equal(await page.getByRole('button', { name: 'Delete' }).isDisabled(), true);
    assert.equal(await page.getByLabel('Name', { exact: true }).isEditable(), false);
    assert.equal(await page.getByLabel('JSON').isEditable(), false);
    await page.getByRole('link', { name: 'Status' }).click();
    await page.locator('dl.figures dd', { hasText: 'Ready' }).waitFor();
    await audit(page, "a reader's status page");
  });

  test('Console: a user whose name is markup (<img src=x onerror=...>) shows those characters and runs nothing, in the table, on its page and in a declared column', async (t) => {
    const data = tempDir(t);
    writeDeclarationsFile(data, [{ path: 'email', unique: false, caseInsensitive: false }]);
    const server = await startTestServer(t, { data });
    const markup = '<img src=x onerror="window.__xss=1">';
    const script = '"><script>window.__xss=2</script><b>bold</b>';
    await seed(server, 1, () => ({ name: markup, email: script }));
    const opened = await open(t);
    if (opened === undefined) return;
    const { page, problems } = opened;
    await signIn(page, `${server.url}/console`);
    await page.getByRole('link', { name: markup }).waitFor();
    assert.equal(await page.locator('table.users tbody td:nth-child(4)').textContent(), script);
    await page.getByRole('link', { name: markup }).click();
    await page.getByLabel('Name', { exact: true }).waitFor();
    assert.equal(await page.getByLabel('Name', { exact: true }).inputValue(), markup);
    assert.match(
      (await page.getByRole('heading', { level: 1 }).textContent()) ?? '',
      /^<img src=x onerror="window.__xss=1">/,
    );
    await page.getByRole('button', { name: 'Delete' }).click();
    assert.match((await page.getByRole('dialog').textContent()) ?? '', /Delete <img src=x onerror/);
    await page.getByRole('button', { name: 'Cancel' }).click();
    assert.equal(await page.evaluate('window.__xss'), undefined, 'nothing ran');
    assert.equal(await page.locator('main img, main script, main b').count(), 0, 'no element was made of the text');
    assert.deepEqual(problems, [], 'nothing was even tried that the policy had to refuse');
  });

  // ------------------------------------------------------------ keyboard, sizes, accessibility

  test('Console by keyboard alone: sign in, sort, open a user, edit and save, confirm a dialog with Escape', async (t) => {
    const server = await startTestServer(t);
    await seed(server, 3, (i) => ({ name: ['Cat', 'Ann', 'Bob'][i - 1]! }));
    const opened = await open(t);
    if (opened === undefined) return;
    const { page } = opened;
    await page.goto(`${server.url}/console`);
    await page.getByLabel('User name').waitFor();
    // The focus starts in the first field of the form.
    await page.keyboard.type('admin');
    await page.keyboard.press('Tab');
    await page.keyboard.type(ADMIN_PASSWORD);
    await page.keyboard.press('Enter');
    await page.getByRole('table').waitFor();
    await until(page, `document.querySelectorAll('table.users tbody tr').length === 3`);
    await page.getByRole('columnheader', { name: 'name' }).getByRole('button').focus();
    await page.keyboard.press('Enter');
    await until(page, `document.querySelector('table.users tbody td:nth-child(3)')?.textContent === 'Ann'`);
    await page.getByRole('link', { name: 'Ann' }).focus();
    await page.keyboard.press('Enter');
    const name = page.getByLabel('Name', { exact: true });
    await name.waitFor();
    await name.focus();
    await page.keyboard.press('End');
    await page.keyboard.type(' Lee');
    await page.keyboard.press('Enter');
    await page.getByText('Saved.', { exact: true }).first().waitFor();
    assert.equal((await send(server.url, 'GET', '/users/2')).json().name, 'Ann Lee');
    await page.getByRole('button', { name: 'Delete' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('dialog').waitFor();
    assert.equal(
      await page.evaluate<string>('document.activeElement.textContent'),
      'Cancel',
      'the dialog starts on Cancel',
    );
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    assert.equal((await send(server.url, 'GET', '/users/2')).status, 200);
  });

  // One test a width and scheme, so that they run at once.
  for (const colorScheme of ['light', 'dark'] as const)
    for (const width of [375, 1440])
      test(`Console at ${width} px, ${colorScheme}: no page scrolls sideways, and axe-core finds no serious or critical violation on any page`, async (t) => {
        const server = await startTestServer(t);
        await seed(
          server,
          30,
          (i) => ({ name: `A person with a rather long name, number ${i}`, team: 'red', tags: ['x', 'y'] }),
          'someone',
        );
        const cookie = await server.login();
        await send(server.url, 'POST', '/tokens', { json: { name: 'audit' }, headers: { cookie } });
        const opened = await open(t, { viewport: { width, height: 800 }, colorScheme });
        if (opened === undefined) return;
        const { page, problems } = opened;
        const where = (view: string) => `${view} at ${width} px, ${colorScheme}`;
        await page.goto(`${server.url}/console`);
        await page.getByLabel('User name').waitFor();
        await audit(page, where('the sign-in page'));
        assert.equal(await scrollsSideways(page), false, where('the sign-in page'));
        await signIn(page, `${server.url}/console`);
        const views: [string, string, () => Promise<unknown>][] = [
          ['#/users', 'the users table', () => page.locator('table.users tbody tr').first().waitFor()],
          ['#/users?q=name%20eq%20blue', 'a malformed filter', () => page.getByRole('alert').waitFor()],
          ['#/users/1', "a user's page", () => page.getByLabel('Name', { exact: true }).waitFor()],
          ['#/new', 'New user', () => page.getByLabel('Alias (optional)').waitFor()],
          ['#/tokens', 'the tokens', () => page.getByRole('cell', { name: 'audit', exact: true }).waitFor()],
          ['#/status', 'the status', () => page.locator('dl.figures dd', { hasText: 'Ready' }).waitFor()],
        ];
        for (const [hash, view, ready] of views) {
          await page.goto(`${server.url}/console${hash}`);
          await ready();
          await audit(page, where(view));
          assert.equal(await scrollsSideways(page), false, where(view));
        }
        // The dialog and the conflict view too.
        await page.goto(`${server.url}/console#/users/1`);
        await page.getByLabel('Name', { exact: true }).waitFor();
        await page.getByLabel('JSON').fill('{"name":"Mine","id":1}');
        const elsewhere = { name: `Elsewhere at ${width} px, ${colorScheme}`, id: 1 };
        assert.equal((await put(server.url, '/users/1', elsewhere, { cookie })).status, 200);
        await page.getByRole('button', { name: 'Save' }).click();
        await page.getByRole('region', { name: 'Someone else changed this user' }).waitFor();
        await audit(page, where('the conflict view'));
        assert.equal(await scrollsSideways(page), false, where('the conflict view'));
        await page.getByRole('button', { name: 'Delete' }).click();
        await page.getByRole('dialog').waitFor();
        await audit(page, where('the delete dialog'));
        assert.deepEqual(problems, []);
      });

  // ------------------------------------------------------------ behind a proxy, over TLS

  /** A reverse proxy that serves `target` under `prefix` (the way `proxy_pass http://backend/;` does), Host passed through. */
  async function prefixProxy(t: TestContext, target: string, prefix: string): Promise<string> {
    const backend = new URL(target);
    const proxy: Server = createServer((req, res) => {
      if (!req.url!.startsWith(`${prefix}/`)) {
        res.writeHead(404).end();
        return;
      }
      const upstream = httpRequest(
        {
          host: backend.hostname,
          port: backend.port,
          method: req.method,
          path: req.url!.slice(prefix.length),
          headers: req.headers,
        },
        (answer) => {
          res.writeHead(answer.statusCode!, answer.headers);
          // As the server does (and nginx with X-Accel-Buffering: no): the feed's headers go at once.
          res.flushHeaders();
          answer.pipe(res);
        },
      );
      upstream.on('error', () => res.destroy());
      req.pipe(upstream);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    t.after(() => {
      proxy.closeAllConnections();
      proxy.close();
    });
    return `http://127.0.0.1:${(proxy.address() as AddressInfo).port}${prefix}`;
  }

  test('Console behind a proxy that serves the server under a path prefix (/admin/users-server/console): it signs in, lists, saves and follows the feed through the prefix', async (t) => {
    const server = await startTestServer(t, { requireSession: 'all' });
    await seed(server, 2, (i) => ({ name: `Person ${i}` }));
    const base = await prefixProxy(t, server.url, '/admin/users-server');
    const opened = await open(t);
    if (opened === undefined) return;
    const { page, problems } = opened;
    const outside: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(base) && !r.url().startsWith('data:')) outside.push(r.url());
    });
    await signIn(page, `${base}/console`);
    await page.getByRole('link', { name: 'Person 1' }).click();
    await page.getByLabel('Name', { exact: true }).fill('Through the proxy');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByText('Saved.', { exact: true }).first().waitFor();
    await page.getByRole('link', { name: 'Users', exact: true }).click();
    await page.getByText('Live', { exact: true }).waitFor();
    const cookie = await server.login();
    assert.equal((await put(server.url, '/users/2', { name: 'Seen live' }, { cookie })).status, 200);
    await page.getByRole('link', { name: 'Seen live' }).waitFor();
    assert.deepEqual(outside, [], 'every request went through the prefix');
    assert.deepEqual(problems, []);
  });

  test('Console over TLS with --cookie-secure: the session is the __Host- cookie, Secure, and writes pass the cross-site check', async (t) => {
    if (spawnSync('openssl', ['version']).error !== undefined) return t.skip('openssl is missing');
    const dir = tempDir(t);
    const cert = join(dir, 'console.crt');
    const key = join(dir, 'console.key');
    const made = spawnSync('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '2',
      '-subj',
      '/CN=console',
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ]);
    assert.equal(made.status, 0, made.stderr?.toString());
    const server = await startTestServer(t, { tlsCert: cert, tlsKey: key, cookieSecure: true, requireSession: 'all' });
    assert.match(server.url, /^https:/);
    const opened = await open(t, { ignoreHTTPSErrors: true });
    if (opened === undefined) return;
    const { context, page } = opened;
    await signIn(page, `${server.url}/console`);
    const session = (await context.cookies()).find((c) => c.name === '__Host-USER_TOKEN');
    assert.ok(session !== undefined && session.secure && session.httpOnly, 'the __Host- cookie, Secure and HttpOnly');
    await page.getByRole('button', { name: 'New user' }).click();
    await page.getByLabel('Name').fill('Over TLS');
    await page.getByRole('button', { name: 'Create' }).click();
    await page.waitForURL(/#\/users\/1$/);
    await page.getByLabel('Name', { exact: true }).waitFor();
    assert.equal(await page.getByLabel('Name', { exact: true }).inputValue(), 'Over TLS');
  });

  test('Console: writes from another site with the session cookie are still refused (the console needs no opening of the API)', async (t) => {
    const server = await startTestServer(t, { requireSession: 'all' });
    const cookie = await server.login();
    const forged = await send(server.url, 'PUT', '/users/x', {
      json: { name: 'Mallory' },
      headers: { cookie, origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' },
    });
    assert.equal(forged.status, 403);
    const login = await send(server.url, 'POST', '/login', {
      headers: { authorization: basic('admin', ADMIN_PASSWORD) },
    });
    assert.equal(login.status, 200);
  });
});
