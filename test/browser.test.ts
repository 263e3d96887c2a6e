/**
 * The browser sign-in page (`--login-page`) end to end, in a real headless
 * Chromium driven by playwright-core, against the real
 * `bin/users-server.js`: redirected from / to /login, sign in, stay signed
 * in across a reload, an HttpOnly cookie that scripts cannot read, sign out,
 * and a wrong password shown in the page. The sign-in page is saved as a
 * screenshot in test-artifacts/ for a human to look at. And the feed of
 * changes in the browser: the EventSource example of docs/api.md.
 *
 * Needs Debian's chromium at /usr/bin/chromium (.ci/run installs it when it
 * can); without it the tests skip and say why.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { ADMIN_PASSWORD, buildIfStale, put, startTestServer, tempDir } from './helpers.js';
import { SERVER_BIN, spawnChild, type Child } from './processes.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const CHROMIUM = '/usr/bin/chromium';
/** Where the screenshots go; in .gitignore. */
const ARTIFACTS = join(REPO, 'test-artifacts');
const TEST_OPTIONS = {};

let skipReason: string | undefined;
let server: Child | undefined;
let base = '';
let browser: Browser | undefined;

before(async () => {
  if (!existsSync(CHROMIUM)) {
    skipReason = `${CHROMIUM} is missing (Debian: apt-get install chromium)`;
    console.log(`# browser tests skipped: ${skipReason}`);
    return;
  }
  skipReason = buildIfStale();
  if (skipReason !== undefined) {
    console.log(`# browser tests skipped: ${skipReason}`);
    return;
  }
  // The real server with --login-page, for the whole file (stopped in after()).
  server = spawnChild(
    undefined,
    process.execPath,
    [
      SERVER_BIN,
      '--login-page',
      '--port',
      '0',
      '--data',
      tempDir(undefined, 'users-server-browser-'),
      '--log-format',
      'off',
    ],
    {
      env: { PATH: process.env.PATH, USERS_ADMIN_PASSWORD: ADMIN_PASSWORD, USERS_PASSWORD_COST: '1' },
    },
  );
  base = (await server.waitForLine(/^listening on (http:\/\/\S+)$/))[1]!;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
});

after(async () => {
  await browser?.close();
  server?.kill('SIGTERM');
  await server?.exited;
});

/** A fresh browser profile (its own cookie jar) and page, closed after the test; undefined when skipping. */
async function newPage(t: {
  skip(message: string): void;
  after(fn: () => Promise<void>): void;
}): Promise<{ context: BrowserContext; page: Page } | undefined> {
  if (skipReason !== undefined || browser === undefined) {
    t.skip(skipReason ?? 'no browser');
    return undefined;
  }
  const context = await browser.newContext();
  t.after(() => context.close());
  const page = await context.newPage();
  return { context, page };
}

/** Collects what the page's Content-Security-Policy refused, as Chromium reports it on the console. */
function cspViolations(page: Page): string[] {
  const violations: string[] = [];
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
  });
  return violations;
}

/** The text of the document, trimmed: for a JSON response, the JSON itself. */
function bodyText(page: Page): Promise<string> {
  // Chromium shows a JSON response in a <pre>. (A string: the tests are not typed with the DOM library.)
  return page.evaluate<string>("(document.querySelector('pre') ?? document.body).textContent.trim()");
}

test(
  'Browser sign-in in Chromium: / redirects to /login; signing in lands on / with "OK", which survives a reload; the cookie is HttpOnly; signing out sends / back to /login',
  TEST_OPTIONS,
  async (t) => {
    const opened = await newPage(t);
    if (opened === undefined) return;
    const { context, page } = opened;
    const violations = cspViolations(page);

    const first = await page.goto(`${base}/`);
    assert.equal(new URL(page.url()).pathname, '/login', 'the 302 was followed to the sign-in page');
    assert.equal(first?.status(), 200);
    assert.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Sign in');
    // The inline style sheet applied: the CSP hash is the sheet's own.
    assert.equal(
      await page.evaluate<string>("getComputedStyle(document.querySelector('main')).borderTopStyle"),
      'solid',
    );
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'sign-in.png'), fullPage: true });

    await page.getByLabel('User name').fill('admin');
    await page.getByLabel('Password').fill(ADMIN_PASSWORD);
    await Promise.all([page.waitForURL(`${base}/`), page.getByRole('button', { name: 'Sign in' }).click()]);
    assert.equal(await bodyText(page), '"OK"');

    const reloaded = await page.reload();
    assert.equal(reloaded?.status(), 200);
    assert.equal(await bodyText(page), '"OK"', 'still signed in after a reload');

    const session = (await context.cookies()).find((c) => c.name === 'USER_TOKEN');
    assert.ok(session !== undefined, 'the browser holds USER_TOKEN');
    assert.equal(session.httpOnly, true);
    assert.equal(session.sameSite, 'Lax');
    assert.equal(session.path, '/');
    const scriptCookies = await page.evaluate<string>('document.cookie');
    assert.ok(!scriptCookies.includes('USER_TOKEN'), `document.cookie does not show USER_TOKEN: ${scriptCookies}`);

    await page.goto(`${base}/login`);
    assert.match((await page.locator('main').textContent()) ?? '', /Signed in as admin/);
    await Promise.all([page.waitForURL(`${base}/login`), page.getByRole('button', { name: 'Sign out' }).click()]);
    assert.equal(
      await page.getByRole('heading', { level: 1 }).textContent(),
      'Sign in',
      'signed out, back on the sign-in form',
    );
    assert.equal(
      (await context.cookies()).find((c) => c.name === 'USER_TOKEN'),
      undefined,
      'the cookie is gone',
    );

    await page.goto(`${base}/`);
    assert.equal(new URL(page.url()).pathname, '/login', 'without a session / sends the browser to /login again');
    assert.deepEqual(violations, [], 'the Content-Security-Policy refused nothing');
  },
);

test(
  'Browser sign-in in Chromium: a wrong password shows the error in the page (role=alert) and keeps the form usable',
  TEST_OPTIONS,
  async (t) => {
    const opened = await newPage(t);
    if (opened === undefined) return;
    const { context, page } = opened;
    await page.goto(`${base}/login`);
    await page.getByLabel('User name').fill('admin');
    await page.getByLabel('Password').fill('not-the-password');
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url() === `${base}/login` && r.request().method() === 'POST'),
      page.getByRole('button', { name: 'Sign in' }).click(),
    ]);
    assert.equal(response.status(), 401);
    await page.waitForLoadState();
    assert.equal(await page.getByRole('alert').textContent(), 'The user name or password is wrong.');
    assert.equal(await page.getByLabel('User name').inputValue(), 'admin', 'the user name is kept');
    assert.equal(await page.getByLabel('Password').inputValue(), '', 'the password is not');
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'sign-in-error.png'), fullPage: true });
    assert.equal(
      (await context.cookies()).find((c) => c.name === 'USER_TOKEN'),
      undefined,
      'no session',
    );

    await page.getByLabel('Password').fill(ADMIN_PASSWORD);
    await Promise.all([page.waitForURL(`${base}/`), page.getByRole('button', { name: 'Sign in' }).click()]);
    assert.equal(await bodyText(page), '"OK"', 'the re-rendered form signs in');
  },
);

/** The EventSource example of docs/api.md, as written there (without its list indent). */
function eventSourceExample(): string {
  const match = /```js\n([\s\S]*?new EventSource[\s\S]*?)```/.exec(readFileSync(join(REPO, 'docs', 'api.md'), 'utf8'));
  assert.ok(match !== null, 'docs/api.md has the EventSource example');
  return match[1]!.replace(/^ {2}/gm, '');
}

test(
  'Browser feed of changes in Chromium: the EventSource example of docs/api.md, signed in on the sign-in page under --require-session all, gets each change once, resumes after a cut connection with Last-Event-ID, and closes once its session is signed out',
  TEST_OPTIONS,
  async (t) => {
    const opened = await newPage(t);
    if (opened === undefined) return;
    const { page } = opened;
    // In process: the test ends the feeds' wait for their next check of the session (every 15 s).
    const server = await startTestServer(t, { requireSession: 'all', loginPage: true });
    await page.goto(`${server.url}/login`);
    await page.getByLabel('User name').fill('admin');
    await page.getByLabel('Password').fill(ADMIN_PASSWORD);
    await Promise.all([page.waitForURL(`${server.url}/`), page.getByRole('button', { name: 'Sign in' }).click()]);
    await page.evaluate(
      `(() => { window.seen = []; const render = (change) => window.seen.push(change.cursor + ' ' + change.op + ' ' + change.id); ${eventSourceExample()}; window.feed = feed; })()`,
    );
    await page.waitForFunction('window.feed.readyState === EventSource.OPEN');
    const admin = await server.login();
    assert.equal((await put(server.url, '/users/ann', { name: 'Ann' }, { cookie: admin })).status, 201);
    await page.waitForFunction('window.seen.length === 1');

    // Every connection cut: the browser connects again with Last-Event-ID and gets what it missed, once.
    server.running.server.closeAllConnections();
    assert.equal((await put(server.url, '/users/bob', { name: 'Bob' }, { cookie: admin })).status, 201);
    await page.waitForFunction('window.seen.length === 2');
    assert.deepEqual(await page.evaluate('window.seen'), ['1 put 1', '2 put 2']);

    assert.equal(await page.evaluate("fetch('/logout', { method: 'POST' }).then((r) => r.status)"), 204);
    server.running.app.feeds.recheck();
    await page.waitForFunction('window.feed.readyState === EventSource.CLOSED');
    assert.deepEqual(await page.evaluate('window.seen'), ['1 put 1', '2 put 2'], 'nothing after the session ended');
  },
);
