import assert from 'node:assert/strict';
import { chmod, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { Cookie, CookieJar } from 'tough-cookie';
import { defaultJarPath, loadJar, saveJar } from '../cli/jar.js';
import { COOKIE_FILE_HEADER, formatCookieFile, parseCookieFile, type CookieLine } from '../shared/cookie-file.js';
import { tempDir } from './helpers.js';

// shared/cookie-file.ts (the Netscape cookie file format, curl's lib/cookie.c
// conventions) and cli/jar.ts (its bridge to tough-cookie and the disk).

const T = '\t';
const line = (...fields: string[]) => fields.join(T);

function cookie(overrides: Partial<CookieLine> = {}): CookieLine {
  return {
    domain: '127.0.0.1',
    includeSubdomains: false,
    path: '/',
    secure: false,
    httpOnly: false,
    expires: 1_900_000_000,
    name: 'USER_TOKEN',
    value: 'abc.def',
    ...overrides,
  };
}

/** The cookie lines of a file: neither comments nor blank lines. */
function cookieLinesOf(text: string): string[] {
  return text.split('\n').filter((l) => l !== '' && (l.startsWith('#HttpOnly_') || !l.startsWith('#')));
}

// --- format ------------------------------------------------------------------

test('the header is the first line curl writes: "# Netscape HTTP Cookie File"', () => {
  assert.equal(COOKIE_FILE_HEADER, '# Netscape HTTP Cookie File');
  assert.ok(formatCookieFile([]).startsWith(COOKIE_FILE_HEADER + '\n'));
});

test('formatCookieFile writes the header, one comment line, a blank line, then one LF-terminated line per cookie', () => {
  const text = formatCookieFile([
    cookie({ httpOnly: true }),
    cookie({
      domain: 'example.com',
      includeSubdomains: true,
      path: '/users',
      secure: true,
      expires: 0,
      name: 'a',
      value: '',
    }),
  ]);
  const lines = text.split('\n');
  assert.equal(lines[0], COOKIE_FILE_HEADER);
  assert.match(lines[1]!, /^# \S/);
  assert.equal(lines[2], '');
  assert.equal(lines[3], '#HttpOnly_127.0.0.1\tFALSE\t/\tFALSE\t1900000000\tUSER_TOKEN\tabc.def');
  assert.equal(lines[4], '.example.com\tTRUE\t/users\tTRUE\t0\ta\t');
  assert.equal(lines[5], '');
  assert.equal(lines.length, 6, 'the file ends with a newline and holds nothing else');
});

test('an empty jar is written as the header and comment alone, which parses to no cookies', () => {
  const text = formatCookieFile([]);
  assert.deepEqual(cookieLinesOf(text), []);
  assert.deepEqual(parseCookieFile(text), { cookies: [], warnings: [] });
});

const roundTrips: { name: string; cookie: CookieLine }[] = [
  { name: 'a host-only cookie', cookie: cookie() },
  { name: 'a domain cookie', cookie: cookie({ domain: 'example.com', includeSubdomains: true }) },
  { name: 'an HttpOnly cookie', cookie: cookie({ httpOnly: true }) },
  {
    name: 'an HttpOnly domain cookie',
    cookie: cookie({ httpOnly: true, domain: 'example.com', includeSubdomains: true }),
  },
  { name: 'a Secure cookie', cookie: cookie({ secure: true }) },
  { name: 'a session cookie (expires 0)', cookie: cookie({ expires: 0 }) },
  { name: 'a cookie with a deeper path', cookie: cookie({ path: '/users/42' }) },
  { name: 'a cookie with an empty value', cookie: cookie({ value: '' }) },
  { name: 'a value holding "=", quotes and spaces', cookie: cookie({ value: '"a=b c"' }) },
  { name: 'a value holding non-ASCII text', cookie: cookie({ value: 'caf\u00e9' }) },
  { name: 'an IPv6 host', cookie: cookie({ domain: '::1' }) },
  { name: 'a bracketed IPv6 host', cookie: cookie({ domain: '[::1]' }) },
  { name: 'the largest safe expiry', cookie: cookie({ expires: Number.MAX_SAFE_INTEGER }) },
  { name: 'a name with punctuation', cookie: cookie({ name: '__Host-a.b_c!' }) },
];
for (const c of roundTrips) {
  test(`round trip: ${c.name} parses back to the same fields`, () => {
    assert.deepEqual(parseCookieFile(formatCookieFile([c.cookie])), { cookies: [c.cookie], warnings: [] });
  });
}

test('round trip: several cookies come back in the order written', () => {
  const cookies = [cookie({ name: 'c' }), cookie({ name: 'a' }), cookie({ name: 'b', path: '/x' })];
  assert.deepEqual(parseCookieFile(formatCookieFile(cookies)).cookies, cookies);
});

const unwritable: { name: string; cookie: CookieLine }[] = [
  { name: 'a TAB in the value', cookie: cookie({ value: 'a\tb' }) },
  { name: 'a LF in the value', cookie: cookie({ value: 'a\nb' }) },
  { name: 'a CR in the value', cookie: cookie({ value: 'a\rb' }) },
  { name: 'a ";" in the value', cookie: cookie({ value: 'a;b' }) },
  { name: 'a TAB in the name', cookie: cookie({ name: 'a\tb' }) },
  { name: 'an "=" in the name', cookie: cookie({ name: 'a=b' }) },
  { name: 'a space in the name', cookie: cookie({ name: 'a b' }) },
  { name: 'an empty name', cookie: cookie({ name: '' }) },
  { name: 'a TAB in the path', cookie: cookie({ path: '/a\tb' }) },
  { name: 'a path not starting with "/"', cookie: cookie({ path: 'users' }) },
  { name: 'a domain with its leading dot', cookie: cookie({ domain: '.example.com', includeSubdomains: true }) },
  { name: 'a domain with a port', cookie: cookie({ domain: 'example.com:8080' }) },
  { name: 'an empty domain', cookie: cookie({ domain: '' }) },
  { name: 'a domain starting with "#"', cookie: cookie({ domain: '#example.com' }) },
  { name: 'a negative expiry', cookie: cookie({ expires: -1 }) },
  { name: 'a fractional expiry', cookie: cookie({ expires: 1.5 }) },
  { name: 'an infinite expiry', cookie: cookie({ expires: Infinity }) },
];
for (const c of unwritable) {
  test(`formatCookieFile refuses ${c.name} with a TypeError instead of writing a broken line`, () => {
    assert.throws(() => formatCookieFile([cookie({ name: 'ok' }), c.cookie]), TypeError);
  });
}

// --- parse -------------------------------------------------------------------

test('parseCookieFile reads the file curl 7.88 writes with -c, field by field', () => {
  // Written by `curl -c` against a server answering
  // Set-Cookie: A=1; Path=/; HttpOnly; Max-Age=100 / B=2 / C=3; Domain=localhost; Path=/x / D=; Max-Age=100
  const text = [
    '# Netscape HTTP Cookie File',
    '# https://curl.se/docs/http-cookies.html',
    '# This file was generated by libcurl! Edit at your own risk.',
    '',
    line('localhost', 'FALSE', '/', 'FALSE', '1795431533', 'D', ''),
    line('.localhost', 'TRUE', '/x', 'FALSE', '0', 'C', '3'),
    line('localhost', 'FALSE', '/', 'FALSE', '0', 'B', '2'),
    line('#HttpOnly_localhost', 'FALSE', '/', 'FALSE', '1795431533', 'A', '1'),
    '',
  ].join('\n');
  const base = { domain: 'localhost', includeSubdomains: false, path: '/', secure: false, httpOnly: false };
  assert.deepEqual(parseCookieFile(text), {
    cookies: [
      { ...base, expires: 1795431533, name: 'D', value: '' },
      { ...base, includeSubdomains: true, path: '/x', expires: 0, name: 'C', value: '3' },
      { ...base, expires: 0, name: 'B', value: '2' },
      { ...base, httpOnly: true, expires: 1795431533, name: 'A', value: '1' },
    ],
    warnings: [],
  });
});

test('the secure field TRUE sets secure, FALSE clears it', () => {
  const { cookies } = parseCookieFile(
    [line('h', 'FALSE', '/', 'TRUE', '0', 'a', '1'), line('h', 'FALSE', '/', 'FALSE', '0', 'b', '1')].join('\n'),
  );
  assert.deepEqual(
    cookies.map((c) => c.secure),
    [true, false],
  );
});

test('TRUE and FALSE are read case-insensitively, as curl does', () => {
  const { cookies, warnings } = parseCookieFile(line('.h', 'true', '/', 'True', '0', 'a', '1'));
  assert.deepEqual(warnings, []);
  assert.equal(cookies[0]!.includeSubdomains, true);
  assert.equal(cookies[0]!.secure, true);
});

test('the includeSubdomains flag decides over the leading dot when they disagree, as in curl and wget', () => {
  const { cookies, warnings } = parseCookieFile(
    [
      line('.a.example', 'FALSE', '/', 'FALSE', '0', 'a', '1'),
      line('b.example', 'TRUE', '/', 'FALSE', '0', 'b', '1'),
    ].join('\n'),
  );
  assert.deepEqual(warnings, []);
  assert.deepEqual(
    cookies.map((c) => [c.domain, c.includeSubdomains]),
    [
      ['a.example', false],
      ['b.example', true],
    ],
  );
});

test('the #HttpOnly_ prefix marks the cookie HttpOnly and is not part of the domain', () => {
  const { cookies } = parseCookieFile(line('#HttpOnly_.example.com', 'TRUE', '/', 'FALSE', '0', 'a', '1'));
  assert.equal(cookies[0]!.httpOnly, true);
  assert.equal(cookies[0]!.domain, 'example.com');
  assert.equal(cookies[0]!.includeSubdomains, true);
});

test('the #HttpOnly_ prefix is case-sensitive: "#httponly_..." is a comment, as in curl and python', () => {
  assert.deepEqual(parseCookieFile(line('#httponly_h', 'FALSE', '/', 'FALSE', '0', 'a', '1')), {
    cookies: [],
    warnings: [],
  });
});

test('expiry 0 is a session cookie and a future expiry is kept as Unix seconds', () => {
  const { cookies } = parseCookieFile(
    [line('h', 'FALSE', '/', 'FALSE', '0', 'a', '1'), line('h', 'FALSE', '/', 'FALSE', '2000000000', 'b', '1')].join(
      '\n',
    ),
  );
  assert.deepEqual(
    cookies.map((c) => c.expires),
    [0, 2000000000],
  );
});

test('an expiry beyond 2^53 (curl writes 2^63-1 on Max-Age overflow) is clamped, not refused', () => {
  const { cookies, warnings } = parseCookieFile(line('h', 'FALSE', '/', 'FALSE', '9223372036854775807', 'a', '1'));
  assert.deepEqual(warnings, []);
  assert.equal(cookies[0]!.expires, Number.MAX_SAFE_INTEGER);
});

test('comments, blank and whitespace-only lines, and both header spellings are skipped without warnings', () => {
  const text = [
    '# HTTP Cookie File',
    '# Netscape HTTP Cookie File',
    '',
    '   ',
    '\t',
    '  # indented comment',
    '# a\tcomment\twith\ttabs\tand\tseven\tfields',
    line('h', 'FALSE', '/', 'FALSE', '0', 'a', '1'),
  ].join('\n');
  const { cookies, warnings } = parseCookieFile(text);
  assert.deepEqual(warnings, []);
  assert.deepEqual(
    cookies.map((c) => c.name),
    ['a'],
  );
});

test("a comment line directly above a cookie is its comment, written back above it; one with a blank line between, or above another comment, is no cookie's", () => {
  const text = `${COOKIE_FILE_HEADER}\n# written by someone\n\n# usersctl: set by http://127.0.0.1:8080\n${line('127.0.0.1', 'FALSE', '/', 'FALSE', '0', 'A', '1')}\n${line('127.0.0.1', 'FALSE', '/', 'FALSE', '0', 'B', '2')}\n# first\n# second\n${line('127.0.0.1', 'FALSE', '/', 'FALSE', '0', 'C', '3')}\n`;
  const { cookies, warnings } = parseCookieFile(text);
  assert.deepEqual(warnings, []);
  assert.deepEqual(
    cookies.map((c) => [c.name, c.comment]),
    [
      ['A', 'usersctl: set by http://127.0.0.1:8080'],
      ['B', undefined],
      ['C', 'second'],
    ],
  );
  const written = formatCookieFile(cookies);
  assert.match(
    written,
    /\n# usersctl: set by http:\/\/127\.0\.0\.1:8080\n127\.0\.0\.1\tFALSE\t\/\tFALSE\t0\tA\t1\n127\.0\.0\.1\tFALSE[^\n]*\tB\t2\n# second\n/,
  );
  assert.deepEqual(parseCookieFile(written).cookies, cookies);
  assert.equal(
    parseCookieFile(`# a\tcomment\n${line('h', 'FALSE', '/', 'FALSE', '0', 'a', '1')}\n`).cookies[0]!.comment,
    undefined,
    'a comment with a TAB could not be written back',
  );
  assert.throws(() => formatCookieFile([cookie({ comment: 'two\nlines' })]), /comment may not hold control characters/);
});

test('a file without the header is still read (curl does not require it)', () => {
  assert.equal(parseCookieFile(line('h', 'FALSE', '/', 'FALSE', '0', 'a', '1') + '\n').cookies.length, 1);
});

test('a file without a final newline keeps its last cookie', () => {
  const text = COOKIE_FILE_HEADER + '\n' + line('h', 'FALSE', '/', 'FALSE', '0', 'a', '1');
  assert.deepEqual(
    parseCookieFile(text).cookies.map((c) => c.name),
    ['a'],
  );
});

test('a CRLF file parses exactly like the LF file: no CR left in values', () => {
  const lf = formatCookieFile([
    cookie({ httpOnly: true }),
    cookie({ name: 'empty', value: '' }),
    cookie({ name: 's', expires: 0 }),
  ]);
  const crlf = lf.replaceAll('\n', '\r\n');
  assert.deepEqual(parseCookieFile(crlf), parseCookieFile(lf));
  assert.ok(parseCookieFile(crlf).cookies.every((c) => !c.value.includes('\r')));
});

test('a leading UTF-8 byte order mark does not hide the first line', () => {
  const { cookies, warnings } = parseCookieFile('\uFEFF' + line('h', 'FALSE', '/', 'FALSE', '0', 'a', '1'));
  assert.deepEqual(warnings, []);
  assert.equal(cookies.length, 1);
});

test('a line of six fields is a cookie with an empty value (curl: "blank contents")', () => {
  const { cookies, warnings } = parseCookieFile(line('h', 'FALSE', '/', 'FALSE', '0', 'a'));
  assert.deepEqual(warnings, []);
  assert.equal(cookies[0]!.value, '');
  assert.equal(cookies[0]!.name, 'a');
});

test('wget\'s "host:port" domain is read with the port dropped (cookies do not isolate by port)', () => {
  const { cookies, warnings } = parseCookieFile(
    [
      line('127.0.0.1:18555', 'FALSE', '/', 'FALSE', '0', 'a', '1'),
      line('[::1]:8080', 'FALSE', '/', 'FALSE', '0', 'b', '1'),
    ].join('\n'),
  );
  assert.deepEqual(warnings, []);
  assert.deepEqual(
    cookies.map((c) => c.domain),
    ['127.0.0.1', '[::1]'],
  );
});

const malformed: { name: string; line: string; why: RegExp }[] = [
  { name: 'five fields', line: line('h', 'FALSE', '/', 'FALSE', '0'), why: /7 tab-separated fields, found 5/ },
  {
    name: 'eight fields (a TAB in the value)',
    line: line('h', 'FALSE', '/', 'FALSE', '0', 'a', 'x', 'y'),
    why: /found 8/,
  },
  { name: 'space-separated fields', line: 'h FALSE / FALSE 0 a 1', why: /found 1/ },
  { name: 'a bare #HttpOnly_ prefix', line: '#HttpOnly_', why: /found 1/ },
  { name: 'an empty domain', line: line('', 'FALSE', '/', 'FALSE', '0', 'a', '1'), why: /invalid domain/ },
  { name: 'a lone dot as domain', line: line('.', 'TRUE', '/', 'FALSE', '0', 'a', '1'), why: /invalid domain/ },
  {
    name: 'a domain with a space',
    line: line('ex ample.com', 'FALSE', '/', 'FALSE', '0', 'a', '1'),
    why: /invalid domain/,
  },
  {
    name: 'a domain with leading blanks',
    line: line('  h', 'FALSE', '/', 'FALSE', '0', 'a', '1'),
    why: /invalid domain/,
  },
  {
    name: 'an includeSubdomains of YES',
    line: line('h', 'YES', '/', 'FALSE', '0', 'a', '1'),
    why: /includeSubdomains must be TRUE or FALSE/,
  },
  {
    name: 'an empty secure field',
    line: line('h', 'FALSE', '/', '', '0', 'a', '1'),
    why: /secure must be TRUE or FALSE/,
  },
  { name: 'a path without "/"', line: line('h', 'FALSE', 'users', 'FALSE', '0', 'a', '1'), why: /invalid path/ },
  {
    name: 'a negative expiry',
    line: line('h', 'FALSE', '/', 'FALSE', '-1', 'a', '1'),
    why: /expires must be Unix seconds/,
  },
  { name: 'a fractional expiry', line: line('h', 'FALSE', '/', 'FALSE', '1.5', 'a', '1'), why: /expires/ },
  { name: 'an expiry as a date', line: line('h', 'FALSE', '/', 'FALSE', 'Tue, 01 Jan 2030', 'a', '1'), why: /expires/ },
  { name: 'an empty expiry', line: line('h', 'FALSE', '/', 'FALSE', '', 'a', '1'), why: /expires/ },
  { name: 'an empty name', line: line('h', 'FALSE', '/', 'FALSE', '0', '', '1'), why: /invalid cookie name/ },
  { name: 'a name with "="', line: line('h', 'FALSE', '/', 'FALSE', '0', 'a=b', '1'), why: /invalid cookie name/ },
  { name: 'a name with a space', line: line('h', 'FALSE', '/', 'FALSE', '0', 'a b', '1'), why: /invalid cookie name/ },
  {
    name: 'a value with ";"',
    line: line('h', 'FALSE', '/', 'FALSE', '0', 'a', '1;2'),
    why: /invalid value for cookie a/,
  },
  {
    name: 'a value with a control character',
    line: line('h', 'FALSE', '/', 'FALSE', '0', 'a', '1\x012'),
    why: /invalid value/,
  },
  { name: 'a CR inside the line', line: line('h', 'FALSE', '/', 'FALSE', '0', 'a', '1\r2'), why: /invalid value/ },
  { name: 'a Set-Cookie header line', line: 'Set-Cookie: a=1; Path=/', why: /found 1/ },
];
for (const c of malformed) {
  test(`a line with ${c.name} is skipped with a "line N: why" warning; the lines around it are kept`, () => {
    const text = [
      COOKIE_FILE_HEADER,
      line('h', 'FALSE', '/', 'FALSE', '0', 'before', '1'),
      c.line,
      line('h', 'FALSE', '/', 'FALSE', '0', 'after', '1'),
      '',
    ].join('\n');
    const { cookies, warnings } = parseCookieFile(text);
    assert.deepEqual(
      cookies.map((k) => k.name),
      ['before', 'after'],
    );
    assert.equal(warnings.length, 1, warnings.join('\n'));
    assert.match(warnings[0]!, /^line 3: /);
    assert.match(warnings[0]!, c.why);
  });
}

test('warning line numbers count every physical line, comments and blank lines included, in CRLF files too', () => {
  const text = [
    COOKIE_FILE_HEADER,
    '# comment',
    '',
    'bad',
    line('h', 'FALSE', '/', 'FALSE', '0', 'a', '1'),
    '',
    'also bad',
  ].join('\r\n');
  assert.deepEqual(
    parseCookieFile(text).warnings.map((w) => w.split(':')[0]),
    ['line 4', 'line 7'],
  );
});

test('parseCookieFile never throws: arbitrary bytes give cookies and warnings', () => {
  let seed = 7;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const alphabet = [
    '\t',
    '\n',
    '\r',
    '#',
    '.',
    'TRUE',
    'FALSE',
    '/',
    '0',
    'a',
    '=',
    ';',
    '#HttpOnly_',
    ' ',
    '\u0000',
    '\uFEFF',
    ':',
    '9',
  ];
  for (let i = 0; i < 500; i++) {
    let text = '';
    for (let j = 0; j < 60; j++) text += alphabet[Math.floor(random() * alphabet.length)];
    const { cookies, warnings } = parseCookieFile(text);
    // Whatever was accepted can be written back, and reads back the same.
    assert.deepEqual(parseCookieFile(formatCookieFile(cookies)).cookies, cookies);
    assert.ok(warnings.every((w) => /^line \d+: /.test(w)));
  }
});

// --- cli/jar.ts: tough-cookie <-> file ---------------------------------------

const ORIGIN = 'http://127.0.0.1:8080/';

test('loadJar of a missing file is an empty jar without warnings', async (t) => {
  const { jar, warnings } = await loadJar(join(tempDir(t), 'nope', 'cookies.txt'));
  assert.deepEqual(warnings, []);
  assert.deepEqual(await jar.store.getAllCookies(), []);
});

test('loadJar of an unreadable path (a directory) rejects instead of pretending the jar is empty', async (t) => {
  await assert.rejects(loadJar(tempDir(t)), { code: 'EISDIR' });
});

test('the server\'s host-only HttpOnly cookie is saved as "#HttpOnly_<host> FALSE" with Max-Age turned into Unix seconds', async (t) => {
  const path = join(tempDir(t), 'cookies.txt');
  const jar = new CookieJar();
  const before = Math.floor(Date.now() / 1000);
  await jar.setCookie('USER_TOKEN=abc.def; Path=/; HttpOnly; SameSite=Lax; Max-Age=43200', ORIGIN);
  await saveJar(jar, path);
  const after = Math.ceil(Date.now() / 1000);
  const lines = cookieLinesOf(await readFile(path, 'utf8'));
  assert.equal(lines.length, 1);
  const fields = lines[0]!.split('\t');
  assert.deepEqual(
    [...fields.slice(0, 4), ...fields.slice(5)],
    ['#HttpOnly_127.0.0.1', 'FALSE', '/', 'FALSE', 'USER_TOKEN', 'abc.def'],
  );
  const expires = Number(fields[4]);
  assert.ok(expires >= before + 43200 && expires <= after + 43200, `expires ${expires}`);
});

test('a saved jar loads back with the same cookie string, flags and host-only state', async (t) => {
  const path = join(tempDir(t), 'cookies.txt');
  const jar = new CookieJar();
  await jar.setCookie('USER_TOKEN=abc.def; Path=/; HttpOnly; Max-Age=600', ORIGIN);
  await jar.setCookie('other=1; Path=/users', ORIGIN);
  await saveJar(jar, path);
  const { jar: loaded, warnings } = await loadJar(path);
  assert.deepEqual(warnings, []);
  assert.equal(await loaded.getCookieString(ORIGIN + 'users/1'), await jar.getCookieString(ORIGIN + 'users/1'));
  const [token] = await loaded.getCookies(ORIGIN);
  assert.equal(token!.key, 'USER_TOKEN');
  assert.equal(token!.hostOnly, true);
  assert.equal(token!.httpOnly, true);
  assert.equal(token!.isPersistent(), true);
});

test('a host-only cookie stays host-only after a round trip: not sent to a subdomain', async (t) => {
  const path = join(tempDir(t), 'cookies.txt');
  const jar = new CookieJar();
  await jar.setCookie('h=1', 'http://example.com/');
  await saveJar(jar, path);
  assert.deepEqual(cookieLinesOf(await readFile(path, 'utf8')), ['example.com\tFALSE\t/\tFALSE\t0\th\t1']);
  const { jar: loaded } = await loadJar(path);
  assert.equal(await loaded.getCookieString('http://example.com/'), 'h=1');
  assert.equal(await loaded.getCookieString('http://www.example.com/'), '');
});

test('a Domain cookie is saved as ".<domain> TRUE" and after loading is sent to subdomains', async (t) => {
  const path = join(tempDir(t), 'cookies.txt');
  const jar = new CookieJar();
  await jar.setCookie('d=1; Domain=example.com; Path=/', 'http://www.example.com/');
  await saveJar(jar, path);
  assert.deepEqual(cookieLinesOf(await readFile(path, 'utf8')), ['.example.com\tTRUE\t/\tFALSE\t0\td\t1']);
  const { jar: loaded } = await loadJar(path);
  assert.equal(await loaded.getCookieString('http://example.com/'), 'd=1');
  assert.equal(await loaded.getCookieString('http://api.example.com/'), 'd=1');
  assert.equal(await loaded.getCookieString('http://example.org/'), '');
});

test('a session cookie (no Expires or Max-Age) is written with expiry 0 and loaded back as a session cookie', async (t) => {
  const path = join(tempDir(t), 'cookies.txt');
  const jar = new CookieJar();
  await jar.setCookie('s=1; Path=/', ORIGIN);
  await saveJar(jar, path);
  assert.equal(cookieLinesOf(await readFile(path, 'utf8'))[0]!.split('\t')[4], '0');
  const { jar: loaded } = await loadJar(path);
  const [session] = await loaded.getCookies(ORIGIN);
  assert.equal(session!.isPersistent(), false);
  assert.equal(session!.cookieString(), 's=1');
});

test('an Expires date is written as its Unix seconds', async (t) => {
  const path = join(tempDir(t), 'cookies.txt');
  const jar = new CookieJar();
  await jar.setCookie('e=1; Expires=Wed, 01 Jan 2053 00:00:00 GMT', ORIGIN);
  await saveJar(jar, path);
  assert.equal(cookieLinesOf(await readFile(path, 'utf8'))[0]!.split('\t')[4], String(Date.UTC(2053, 0, 1) / 1000));
});

test('a Secure cookie keeps its flag: after loading it goes to https only', async (t) => {
  const path = join(tempDir(t), 'cookies.txt');
  const jar = new CookieJar();
  await jar.setCookie('sec=1; Secure; Max-Age=600', 'https://example.com/');
  await saveJar(jar, path);
  assert.equal(cookieLinesOf(await readFile(path, 'utf8'))[0]!.split('\t')[3], 'TRUE');
  const { jar: loaded } = await loadJar(path);
  assert.equal(await loaded.getCookieString('https://example.com/'), 'sec=1');
  assert.equal(await loaded.getCookieString('http://example.com/'), '');
});

test("expired cookies are not written: the server's clearing cookie empties the jar file", async (t) => {
  const path = join(tempDir(t), 'cookies.txt');
  const jar = new CookieJar();
  await jar.setCookie('USER_TOKEN=abc; Path=/; HttpOnly; Max-Age=600', ORIGIN);
  await jar.setCookie('gone=1; Expires=Thu, 01 Jan 1970 00:00:01 GMT', ORIGIN);
  await saveJar(jar, path);
  assert.equal(cookieLinesOf(await readFile(path, 'utf8')).length, 1);
  await jar.setCookie(
    'USER_TOKEN=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT',
    ORIGIN,
  );
  await saveJar(jar, path);
  assert.deepEqual(cookieLinesOf(await readFile(path, 'utf8')), []);
});

test('loadJar drops expired lines, keeps unexpired and session ones, and returns the warnings of malformed lines', async (t) => {
  const path = join(tempDir(t), 'cookies.txt');
  const future = Math.floor(Date.now() / 1000) + 3600;
  await writeFile(
    path,
    [
      COOKIE_FILE_HEADER,
      line('127.0.0.1', 'FALSE', '/', 'FALSE', '1', 'old', '1'),
      line('127.0.0.1', 'FALSE', '/', 'FALSE', String(future), 'live', '1'),
      'junk',
      line('127.0.0.1', 'FALSE', '/', 'FALSE', '0', 'session', '1'),
      '',
    ].join('\n'),
  );
  const { jar, warnings } = await loadJar(path);
  assert.deepEqual(warnings, ['line 4: expected 7 tab-separated fields, found 1']);
  assert.deepEqual(
    (await jar.store.getAllCookies()).map((c) => c.key),
    ['live', 'session'],
  );
  assert.equal(await jar.getCookieString(ORIGIN), 'live=1; session=1');
  const [live] = await jar.getCookies(ORIGIN);
  assert.equal(live!.expiryTime(), future * 1000);
});

test("loadJar reads a far-future expiry (curl's 2^63-1) as a persistent cookie, not a session one", async (t) => {
  const path = join(tempDir(t), 'cookies.txt');
  await writeFile(path, line('127.0.0.1', 'FALSE', '/', 'FALSE', '9223372036854775807', 'far', '1') + '\n');
  const { jar } = await loadJar(path);
  const [far] = await jar.getCookies(ORIGIN);
  assert.equal(far!.isPersistent(), true);
  await saveJar(jar, path);
  assert.notEqual(cookieLinesOf(await readFile(path, 'utf8'))[0]!.split('\t')[4], '0');
});

test('loadJar lower-cases the domain, so a hand-written "Example.COM" still matches', async (t) => {
  const path = join(tempDir(t), 'cookies.txt');
  await writeFile(path, line('Example.COM', 'FALSE', '/', 'FALSE', '0', 'a', '1') + '\n');
  const { jar } = await loadJar(path);
  assert.equal(await jar.getCookieString('http://example.com/'), 'a=1');
});

test('cookies keep their order across save and load: equal-path cookies go out oldest first', async (t) => {
  const path = join(tempDir(t), 'cookies.txt');
  const jar = new CookieJar();
  for (const name of ['zeta', 'alpha', 'mid']) await jar.setCookie(`${name}=1`, ORIGIN);
  await jar.setCookie('deep=1; Path=/users', ORIGIN);
  await saveJar(jar, path);
  assert.deepEqual(
    cookieLinesOf(await readFile(path, 'utf8')).map((l) => l.split('\t')[5]),
    ['zeta', 'alpha', 'mid', 'deep'],
  );
  const { jar: loaded } = await loadJar(path);
  assert.equal(await loaded.getCookieString(ORIGIN + 'users/1'), 'deep=1; zeta=1; alpha=1; mid=1');
  await saveJar(loaded, path);
  assert.deepEqual(
    cookieLinesOf(await readFile(path, 'utf8')).map((l) => l.split('\t')[5]),
    ['zeta', 'alpha', 'mid', 'deep'],
  );
});

test('a cookie replaced by the server (session re-issue) is saved with its new value and expiry only', async (t) => {
  const path = join(tempDir(t), 'cookies.txt');
  await writeFile(
    path,
    formatCookieFile([cookie({ httpOnly: true, expires: Math.floor(Date.now() / 1000) + 60, value: 'old' })]),
  );
  const { jar } = await loadJar(path);
  await jar.setCookie('USER_TOKEN=new; Path=/; HttpOnly; Max-Age=43200', ORIGIN);
  await saveJar(jar, path);
  const lines = cookieLinesOf(await readFile(path, 'utf8'));
  assert.equal(lines.length, 1);
  assert.equal(lines[0]!.split('\t')[6], 'new');
  assert.ok(Number(lines[0]!.split('\t')[4]) > Date.now() / 1000 + 43000);
});

test('a cookie tough-cookie holds without a domain is left out rather than written as a broken line', async (t) => {
  const path = join(tempDir(t), 'cookies.txt');
  const jar = new CookieJar();
  await jar.setCookie('kept=1', ORIGIN);
  await jar.store.putCookie(new Cookie({ key: 'nodomain', value: '1', path: '/' }));
  await saveJar(jar, path);
  assert.deepEqual(
    cookieLinesOf(await readFile(path, 'utf8')).map((l) => l.split('\t')[5]),
    ['kept'],
  );
});

const posix = process.platform !== 'win32';

test(
  'saveJar writes the file with mode 0600 and creates missing parent directories with mode 0700',
  { skip: !posix && 'POSIX modes' },
  async (t) => {
    const root = tempDir(t);
    const path = join(root, 'state', 'usersctl', 'cookies.txt');
    const jar = new CookieJar();
    await jar.setCookie('a=1', ORIGIN);
    await saveJar(jar, path);
    assert.equal((await stat(path)).mode & 0o777, 0o600);
    assert.equal((await stat(join(root, 'state', 'usersctl'))).mode & 0o777, 0o700);
    assert.equal((await stat(join(root, 'state'))).mode & 0o777, 0o700);
  },
);

test('the jar file is exactly 0600 whatever the umask', { skip: !posix && 'POSIX modes' }, async (t) => {
  const path = join(tempDir(t), 'cookies.txt');
  const jar = new CookieJar();
  await jar.setCookie('a=1', ORIGIN);
  const umask = process.umask(0o277);
  try {
    await saveJar(jar, path);
  } finally {
    process.umask(umask);
  }
  assert.equal((await stat(path)).mode & 0o777, 0o600);
});

test(
  'saveJar over an existing world-readable jar leaves a 0600 file with only the new content',
  { skip: !posix && 'POSIX modes' },
  async (t) => {
    const path = join(tempDir(t), 'cookies.txt');
    await writeFile(path, 'old content that is much longer than the new file will be'.repeat(100));
    await chmod(path, 0o644);
    const jar = new CookieJar();
    await jar.setCookie('a=1', ORIGIN);
    await saveJar(jar, path);
    assert.equal((await stat(path)).mode & 0o777, 0o600);
    const text = await readFile(path, 'utf8');
    assert.ok(text.startsWith(COOKIE_FILE_HEADER + '\n'));
    assert.deepEqual(cookieLinesOf(text), ['127.0.0.1\tFALSE\t/\tFALSE\t0\ta\t1']);
  },
);

test('saveJar replaces the file by rename (a new inode, never truncated in place) and leaves no temp file', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'cookies.txt');
  const jar = new CookieJar();
  await jar.setCookie('a=1', ORIGIN);
  await saveJar(jar, path);
  const before = await stat(path);
  await jar.setCookie('b=2', ORIGIN);
  await saveJar(jar, path);
  // A new inode: the old file was never truncated in place.
  assert.notEqual((await stat(path)).ino, before.ino);
  assert.deepEqual(await readdir(dir), ['cookies.txt']);
});

test('a failed saveJar (the target is a directory) rejects and leaves no temp file behind', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'cookies.txt');
  await mkdir(join(path, 'child'), { recursive: true });
  const jar = new CookieJar();
  await jar.setCookie('a=1', ORIGIN);
  await assert.rejects(saveJar(jar, path));
  assert.deepEqual(await readdir(dir), ['cookies.txt']);
});

test('concurrent saves of the same jar path never leave a torn file', async (t) => {
  const path = join(tempDir(t), 'cookies.txt');
  const jars = await Promise.all(
    Array.from({ length: 8 }, async (_, i) => {
      const jar = new CookieJar();
      await jar.setCookie(`writer=${i}; Max-Age=600`, ORIGIN);
      return jar;
    }),
  );
  await Promise.all(jars.map((jar) => saveJar(jar, path)));
  const { jar, warnings } = await loadJar(path);
  assert.deepEqual(warnings, []);
  assert.match(await jar.getCookieString(ORIGIN), /^writer=[0-7]$/);
});

test('defaultJarPath is $XDG_STATE_HOME/usersctl/cookies.txt', () => {
  assert.equal(
    defaultJarPath({ XDG_STATE_HOME: '/x/state', HOME: '/home/u' }),
    join('/x/state', 'usersctl', 'cookies.txt'),
  );
});

test('defaultJarPath falls back to ~/.local/state when XDG_STATE_HOME is unset or empty', () => {
  const expected = join('/home/u', '.local', 'state', 'usersctl', 'cookies.txt');
  assert.equal(defaultJarPath({ HOME: '/home/u' }), expected);
  assert.equal(defaultJarPath({ HOME: '/home/u', XDG_STATE_HOME: '' }), expected);
});

test('defaultJarPath ignores a relative XDG_STATE_HOME, as the XDG Base Directory spec requires', () => {
  assert.equal(
    defaultJarPath({ HOME: '/home/u', XDG_STATE_HOME: 'relative/state' }),
    join('/home/u', '.local', 'state', 'usersctl', 'cookies.txt'),
  );
});
