import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmod, readFile, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test, type TestContext } from 'node:test';
import { CookieJar } from 'tough-cookie';
import { loadJar, saveJar } from '../cli/jar.js';
import { run } from '../cli/main.js';
import { formatCookieFile, parseCookieFile, type CookieLine } from '../shared/cookie-file.js';
import { ADMIN_PASSWORD, startTestServer, tempDir } from './helpers.js';
import { runTool } from './processes.js';

// Interop of usersctl's cookie jar (a Netscape cookie file) with the real
// tools: curl, python3's http.cookiejar.MozillaCookieJar, GNU Wget. Each test
// skips with the reason when its tool is missing. The tools run as async child
// processes: the server under test lives in this process, so a synchronous
// spawn would block it.

function version(tool: string, args = ['--version']): string | undefined {
  const result = spawnSync(tool, args, { encoding: 'utf8' });
  return result.error === undefined && result.status === 0
    ? (result.stdout || result.stderr).split('\n')[0]
    : undefined;
}
const CURL = version('curl');
const PYTHON = version('python3');
const WGET = version('wget');

function tool(
  file: string,
  args: readonly string[],
  input?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return runTool(undefined, file, args, { ...(input !== undefined && { input }) });
}

/** `tool` with the child's umask set to `mask` (a child inherits it at spawn). */
function toolWithUmask(mask: number, file: string, args: readonly string[]): ReturnType<typeof tool> {
  const previous = process.umask(mask);
  try {
    return tool(file, args);
  } finally {
    process.umask(previous);
  }
}

async function modeOf(path: string): Promise<number> {
  return (await stat(path)).mode & 0o777;
}

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

/** usersctl in-process with its jar at `jar`, talking to `url`. */
async function usersctl(argv: readonly string[], url: string, jar: string, stdin = ''): Promise<Outcome> {
  let stdout = '';
  let stderr = '';
  const home = tempDir(undefined, 'usersctl-home-');
  const code = await run(argv, {
    stdout: { write: (chunk: string) => (stdout += chunk) },
    stderr: { write: (chunk: string) => (stderr += chunk) },
    stdin: Readable.from(stdin === '' ? [] : [stdin]),
    env: { USERSCTL_URL: url, USERSCTL_COOKIE_JAR: jar, HOME: home, XDG_STATE_HOME: home, NO_COLOR: '1' },
  });
  return { code, stdout, stderr };
}

async function usersctlLogin(url: string, jar: string): Promise<void> {
  const login = await usersctl(['login', '--password-stdin'], url, jar, ADMIN_PASSWORD + '\n');
  assert.equal(login.code, 0, login.stderr);
}

/** A server answering every request 200 "OK" and recording each request's Cookie fields, raw. */
async function startEcho(t: TestContext): Promise<{ url: string; cookies: string[][] }> {
  const cookies: string[][] = [];
  const server = createServer((req, res) => {
    const fields: string[] = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      if (req.rawHeaders[i]!.toLowerCase() === 'cookie') fields.push(req.rawHeaders[i + 1]!);
    }
    cookies.push(fields);
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end('"OK"');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, cookies };
}

async function cookiesIn(path: string): Promise<CookieLine[]> {
  const { cookies, warnings } = parseCookieFile(await readFile(path, 'utf8'));
  assert.deepEqual(warnings, []);
  return cookies;
}

function tokenOf(cookies: readonly CookieLine[], name = 'USER_TOKEN'): CookieLine {
  const token = cookies.find((c) => c.name === name);
  assert.ok(token !== undefined, `a ${name} cookie`);
  return token;
}

// --- curl --------------------------------------------------------------------

test('curl -c writes a jar that usersctl reads and uses: status prints OK', async (t) => {
  if (CURL === undefined) return t.skip('curl not found');
  const server = await startTestServer(t);
  const jar = join(tempDir(t), 'curl-cookies.txt');
  const login = await tool('curl', [
    '-s',
    '-o',
    '/dev/null',
    '-w',
    '%{http_code}',
    '-c',
    jar,
    '-u',
    `admin:${ADMIN_PASSWORD}`,
    '-X',
    'POST',
    `${server.url}/login`,
  ]);
  assert.equal(login.stdout, '200');
  // curl's line for the server's cookie: HttpOnly prefix, host-only, Max-Age as Unix seconds.
  const token = tokenOf(await cookiesIn(jar));
  assert.deepEqual(
    { ...token, expires: token.expires > 0, value: token.value !== '' },
    {
      domain: '127.0.0.1',
      includeSubdomains: false,
      path: '/',
      secure: false,
      httpOnly: true,
      expires: true,
      name: 'USER_TOKEN',
      value: true,
    },
  );
  const status = await usersctl(['status'], server.url, jar);
  assert.deepEqual(status, { code: 0, stdout: 'OK\n', stderr: '' });
});

test('a jar usersctl writes at login is used by curl -b: GET / answers 200 "OK"', async (t) => {
  if (CURL === undefined) return t.skip('curl not found');
  const server = await startTestServer(t);
  const jar = join(tempDir(t), 'cookies.txt');
  await usersctlLogin(server.url, jar);
  const root = await tool('curl', ['-s', '-w', ' %{http_code}', '-b', jar, `${server.url}/`]);
  assert.equal(root.stdout, '"OK" 200');
  const without = await tool('curl', ['-s', '-w', ' %{http_code}', `${server.url}/`]);
  assert.equal(without.stdout.split(' ').at(-1), '401', 'the 200 came from the jar');
});

test('curl re-saves the cookie line usersctl wrote byte for byte', async (t) => {
  if (CURL === undefined) return t.skip('curl not found');
  const server = await startTestServer(t);
  const dir = tempDir(t);
  const jar = join(dir, 'cookies.txt');
  await usersctlLogin(server.url, jar);
  const resaved = join(dir, 'curl-resaved.txt');
  const root = await tool('curl', [
    '-s',
    '-o',
    '/dev/null',
    '-w',
    '%{http_code}',
    '-b',
    jar,
    '-c',
    resaved,
    `${server.url}/`,
  ]);
  assert.equal(root.stdout, '200');
  const cookieLines = (text: string) =>
    text.split('\n').filter((l) => l !== '' && !(l.startsWith('#') && !l.startsWith('#HttpOnly_')));
  assert.deepEqual(cookieLines(await readFile(resaved, 'utf8')), cookieLines(await readFile(jar, 'utf8')));
});

test(
  "curl -c creates a new jar with the umask's mode (0644 under umask 022) and keeps the mode of an existing one",
  { skip: process.platform === 'win32' && 'POSIX modes' },
  async (t) => {
    if (CURL === undefined) return t.skip('curl not found');
    const server = await startTestServer(t);
    const jar = join(tempDir(t), 'curl-cookies.txt');
    const login = await toolWithUmask(0o022, 'curl', [
      '-s',
      '-o',
      '/dev/null',
      '-c',
      jar,
      '-u',
      `admin:${ADMIN_PASSWORD}`,
      '-X',
      'POST',
      `${server.url}/login`,
    ]);
    assert.equal(login.code, 0, login.stderr);
    assert.equal(await modeOf(jar), 0o644);
    await chmod(jar, 0o600);
    const again = await toolWithUmask(0o022, 'curl', [
      '-s',
      '-o',
      '/dev/null',
      '-b',
      jar,
      '-c',
      jar,
      '-u',
      `admin:${ADMIN_PASSWORD}`,
      '-X',
      'POST',
      `${server.url}/login`,
    ]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(await modeOf(jar), 0o600);
  },
);

test("the Cookie header curl sends from usersctl's jar is byte-identical to the one usersctl sends", async (t) => {
  if (CURL === undefined) return t.skip('curl not found');
  const server = await startTestServer(t);
  const jar = join(tempDir(t), 'cookies.txt');
  await usersctlLogin(server.url, jar);
  const echo = await startEcho(t);
  const status = await usersctl(['status'], echo.url, jar);
  assert.equal(status.code, 0, status.stderr);
  const curl = await tool('curl', ['-s', '-o', '/dev/null', '-b', jar, `${echo.url}/`]);
  assert.equal(curl.code, 0, curl.stderr);
  assert.equal(echo.cookies.length, 2);
  const [fromUsersctl, fromCurl] = echo.cookies as [string[], string[]];
  const token = tokenOf(await cookiesIn(jar));
  assert.deepEqual(fromUsersctl, [`USER_TOKEN=${token.value}`]);
  assert.deepEqual(fromCurl, fromUsersctl);
});

test('with several cookies in the jar, curl and usersctl send the same cookie pairs (same-path order may differ)', async (t) => {
  if (CURL === undefined) return t.skip('curl not found');
  const jar = join(tempDir(t), 'cookies.txt');
  const base = { domain: '127.0.0.1', includeSubdomains: false, path: '/', secure: false, httpOnly: false, expires: 0 };
  await writeFile(
    jar,
    formatCookieFile([
      { ...base, httpOnly: true, expires: Math.floor(Date.now() / 1000) + 3600, name: 'USER_TOKEN', value: 'tok.sig' },
      { ...base, name: 'a', value: '1' },
      { ...base, name: 'bb', value: '' },
      { ...base, includeSubdomains: true, domain: 'example.com', name: 'elsewhere', value: '1' },
      { ...base, path: '/users', name: 'deep', value: '1' },
    ]),
  );
  const echo = await startEcho(t);
  const status = await usersctl(['status'], echo.url, jar);
  assert.equal(status.code, 0, status.stderr);
  await tool('curl', ['-s', '-o', '/dev/null', '-b', jar, `${echo.url}/`]);
  const [fromUsersctl, fromCurl] = echo.cookies as [string[], string[]];
  assert.equal(fromUsersctl.length, 1);
  // usersctl follows RFC 6265 section 5.4: longer paths first, then creation
  // order, which for loaded cookies is file order.
  assert.equal(fromUsersctl[0], 'USER_TOKEN=tok.sig; a=1; bb=');
  const pairs = (fields: string[]) => fields.flatMap((f) => f.split('; ')).sort();
  assert.deepEqual(pairs(fromCurl), pairs(fromUsersctl));
});

test('with --cookie-secure, the Secure __Host-USER_TOKEN cookie works over http://127.0.0.1 both ways between curl and usersctl (loopback counts as secure)', async (t) => {
  if (CURL === undefined) return t.skip('curl not found');
  const server = await startTestServer(t, { cookieSecure: true });
  const dir = tempDir(t);
  const fromUsersctl = join(dir, 'usersctl.txt');
  await usersctlLogin(server.url, fromUsersctl);
  assert.equal(tokenOf(await cookiesIn(fromUsersctl), '__Host-USER_TOKEN').secure, true);
  const root = await tool('curl', ['-s', '-w', ' %{http_code}', '-b', fromUsersctl, `${server.url}/`]);
  assert.equal(root.stdout, '"OK" 200');
  const fromCurl = join(dir, 'curl.txt');
  await tool('curl', [
    '-s',
    '-o',
    '/dev/null',
    '-c',
    fromCurl,
    '-u',
    `admin:${ADMIN_PASSWORD}`,
    '-X',
    'POST',
    `${server.url}/login`,
  ]);
  assert.equal(tokenOf(await cookiesIn(fromCurl), '__Host-USER_TOKEN').secure, true);
  const status = await usersctl(['status'], server.url, fromCurl);
  assert.deepEqual(status, { code: 0, stdout: 'OK\n', stderr: '' });
});

// --- python3 http.cookiejar ----------------------------------------------------

const PYTHON_LOAD = `
import http.cookiejar, json, sys, urllib.error, urllib.request
path, url, ignore = sys.argv[1], sys.argv[2], sys.argv[3] == "ignore"
jar = http.cookiejar.MozillaCookieJar()
jar.load(path, ignore_discard=ignore, ignore_expires=ignore)
httponly = getattr(http.cookiejar, "HTTPONLY_ATTR", "HTTPOnly")
cookies = [dict(name=c.name, value=c.value, domain=c.domain, initial_dot=c.domain_initial_dot,
                path=c.path, secure=c.secure, expires=c.expires, httponly=c.has_nonstandard_attr(httponly))
           for c in jar]
status = body = None
if url:
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    try:
        with opener.open(url) as r:
            status, body = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read().decode()
print(json.dumps(dict(cookies=cookies, status=status, body=body)))
`;

interface PythonView {
  cookies: {
    name: string;
    value: string;
    domain: string;
    initial_dot: boolean;
    path: string;
    secure: boolean;
    expires: number | null;
    httponly: boolean;
  }[];
  status: number | null;
  body: string | null;
}

async function pythonLoad(path: string, url = '', ignore = false): Promise<PythonView> {
  const result = await tool('python3', ['-c', PYTHON_LOAD, path, url, ignore ? 'ignore' : 'defaults']);
  assert.equal(result.code, 0, result.stderr);
  return JSON.parse(result.stdout) as PythonView;
}

test("python3 MozillaCookieJar().load() reads usersctl's jar with its defaults and its session passes GET /", async (t) => {
  if (PYTHON === undefined) return t.skip('python3 not found');
  const server = await startTestServer(t);
  const jar = join(tempDir(t), 'cookies.txt');
  await usersctlLogin(server.url, jar);
  const token = tokenOf(await cookiesIn(jar));
  const view = await pythonLoad(jar, `${server.url}/`);
  assert.deepEqual(view.cookies, [
    {
      name: 'USER_TOKEN',
      value: token.value,
      domain: '127.0.0.1',
      initial_dot: false,
      path: '/',
      secure: false,
      expires: token.expires,
      httponly: true,
    },
  ]);
  assert.equal(view.status, 200);
  assert.equal(view.body, '"OK"');
});

test("python3 MozillaCookieJar loads host-only and domain cookies from usersctl's jar with the dot matching the flag", async (t) => {
  if (PYTHON === undefined) return t.skip('python3 not found');
  const path = join(tempDir(t), 'cookies.txt');
  const jar = new CookieJar();
  await jar.setCookie('host=1; Max-Age=3600', 'http://www.example.com/');
  await jar.setCookie('dom=2; Domain=example.com; Path=/api; Secure; Max-Age=3600', 'https://www.example.com/');
  await saveJar(jar, path);
  const view = await pythonLoad(path);
  assert.deepEqual(view.cookies.map((c) => [c.name, c.domain, c.initial_dot, c.path, c.secure]).sort(), [
    ['dom', '.example.com', true, '/api', true],
    ['host', 'www.example.com', false, '/', false],
  ]);
});

test("python3 MozillaCookieJar loads usersctl's session cookies (expiry 0) when told to keep discardable and expired ones", async (t) => {
  if (PYTHON === undefined) return t.skip('python3 not found');
  const path = join(tempDir(t), 'cookies.txt');
  const jar = new CookieJar();
  await jar.setCookie('s=1', 'http://127.0.0.1/');
  await saveJar(jar, path);
  const view = await pythonLoad(path, '', true);
  assert.deepEqual(
    view.cookies.map((c) => [c.name, c.value, c.expires]),
    [['s', '1', 0]],
  );
});

test("python3 urllib does not send usersctl's Secure cookie over http://127.0.0.1, though it loads it", async (t) => {
  if (PYTHON === undefined) return t.skip('python3 not found');
  const server = await startTestServer(t, { cookieSecure: true });
  const jar = join(tempDir(t), 'cookies.txt');
  await usersctlLogin(server.url, jar);
  const view = await pythonLoad(jar, `${server.url}/`);
  assert.deepEqual(
    view.cookies.map((c) => [c.name, c.secure]),
    [['__Host-USER_TOKEN', true]],
  );
  assert.equal(view.status, 401);
});

const PYTHON_LOGIN = `
import base64, http.cookiejar, sys, urllib.request
path, url, password = sys.argv[1], sys.argv[2], sys.stdin.readline().rstrip("\\n")
jar = http.cookiejar.MozillaCookieJar(path)
opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
auth = base64.b64encode(("admin:" + password).encode()).decode()
opener.open(urllib.request.Request(url + "/login", data=b"", method="POST", headers={"Authorization": "Basic " + auth})).read()
jar.save()
`;

test('a jar python3 MozillaCookieJar.save() writes after a login is read and used by usersctl', async (t) => {
  if (PYTHON === undefined) return t.skip('python3 not found');
  const server = await startTestServer(t);
  const jar = join(tempDir(t), 'python-cookies.txt');
  const login = await tool('python3', ['-c', PYTHON_LOGIN, jar, server.url], ADMIN_PASSWORD + '\n');
  assert.equal(login.code, 0, login.stderr);
  // python 3.11 writes the line without "#HttpOnly_" (its save() looks for a
  // "HTTPOnly" attribute, its parser stores "HttpOnly"); usersctl needs neither.
  assert.equal(tokenOf(await cookiesIn(jar)).domain, '127.0.0.1');
  const status = await usersctl(['status'], server.url, jar);
  assert.deepEqual(status, { code: 0, stdout: 'OK\n', stderr: '' });
});

// --- GNU Wget ------------------------------------------------------------------

test('GNU Wget 1.x --load-cookies skips usersctl\'s "#HttpOnly_" lines as comments and sends the session once the prefix is removed', async (t) => {
  if (WGET === undefined) return t.skip('wget not found');
  if (!WGET.startsWith('GNU Wget 1.')) return t.skip(`not GNU Wget 1.x: ${WGET}`);
  const server = await startTestServer(t);
  const dir = tempDir(t);
  const jar = join(dir, 'cookies.txt');
  await usersctlLogin(server.url, jar);
  const token = tokenOf(await cookiesIn(jar));
  const echo = await startEcho(t);
  const asIs = await tool('wget', ['-q', '-O', '-', '--load-cookies', jar, `${echo.url}/`]);
  assert.equal(asIs.code, 0, asIs.stderr);
  const stripped = join(dir, 'wget-cookies.txt');
  await writeFile(stripped, (await readFile(jar, 'utf8')).replaceAll(/^#HttpOnly_/gm, ''));
  const withoutPrefix = await tool('wget', ['-q', '-O', '-', '--load-cookies', stripped, `${echo.url}/`]);
  assert.equal(withoutPrefix.code, 0, withoutPrefix.stderr);
  assert.deepEqual(echo.cookies, [[], [`USER_TOKEN=${token.value}`]]);
});

test('GNU Wget does not send a Secure cookie over http://127.0.0.1, even with the #HttpOnly_ prefix removed', async (t) => {
  if (WGET === undefined) return t.skip('wget not found');
  const dir = tempDir(t);
  const base = { domain: '127.0.0.1', includeSubdomains: false, path: '/', secure: false, httpOnly: false, expires: 0 };
  const jar = join(dir, 'cookies.txt');
  await writeFile(
    jar,
    formatCookieFile([
      { ...base, secure: true, name: 'secure', value: '1' },
      { ...base, name: 'plain', value: '1' },
    ]),
  );
  const echo = await startEcho(t);
  const result = await tool('wget', ['-q', '-O', '-', '--load-cookies', jar, `${echo.url}/`]);
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(echo.cookies, [['plain=1']]);
});

test('a jar GNU Wget --save-cookies writes after a login (host:port domains, no HttpOnly, mode 0644 under umask 022) is read and used by usersctl', async (t) => {
  if (WGET === undefined) return t.skip('wget not found');
  const server = await startTestServer(t);
  const jar = join(tempDir(t), 'wget-cookies.txt');
  const login = await toolWithUmask(0o022, 'wget', [
    '-q',
    '-O',
    '/dev/null',
    '--method=POST',
    '--user=admin',
    `--password=${ADMIN_PASSWORD}`,
    '--auth-no-challenge',
    '--save-cookies',
    jar,
    `${server.url}/login`,
  ]);
  assert.equal(login.code, 0, login.stderr);
  if (process.platform !== 'win32') assert.equal(await modeOf(jar), 0o644, "wget writes with the umask's mode");
  const text = await readFile(jar, 'utf8');
  const { port } = new URL(server.url);
  assert.match(text, new RegExp(`^127\\.0\\.0\\.1:${port}\\tFALSE\\t/\\tFALSE\\t\\d+\\tUSER_TOKEN\\t`, 'm'), text);
  const { jar: loaded, warnings } = await loadJar(jar);
  assert.deepEqual(warnings, []);
  assert.match(await loaded.getCookieString(`${server.url}/`), /^USER_TOKEN=/);
  const status = await usersctl(['status'], server.url, jar);
  assert.deepEqual(status, { code: 0, stdout: 'OK\n', stderr: '' });
});
