/**
 * The Netscape cookie file format: the "cookies.txt" that curl (-b/-c), wget
 * (--load-cookies/--save-cookies) and python3's http.cookiejar.MozillaCookieJar
 * read and write. Pure: text in, text out; no fs.
 *
 * There is no formal spec. The conventions here follow curl's lib/cookie.c
 * (Curl_cookie_add, the "netscape" branch, and get_netscape_format /
 * cookie_output) and https://curl.se/docs/http-cookies.html:
 *
 *   [#HttpOnly_]domain TAB includeSubdomains TAB path TAB secure TAB expires TAB name TAB value
 *
 * - domain: a leading "." marks a domain cookie (sent to subdomains too); without
 *   it the cookie is host-only. curl strips the dot on read and, on write, adds it
 *   exactly when the flag is TRUE ("Mozilla-style").
 * - includeSubdomains ("tailmatch" in curl): TRUE or FALSE. When it disagrees with
 *   the dot, the flag wins, as in curl and wget (python's MozillaCookieJar refuses
 *   such a file; we never write one).
 * - path: the cookie's Path, starting with "/".
 * - secure: TRUE or FALSE. curl compares both flags case-insensitively.
 * - expires: Unix seconds; 0 marks a session cookie (curl writes 0 for a cookie
 *   without Expires/Max-Age). Digits only: curlx_strtoofft refuses a sign.
 * - name, value: the cookie pair. A line of six fields is a cookie with an empty
 *   value (curl: "we got a cookie with blank contents").
 * - "#HttpOnly_" before the domain marks an HttpOnly cookie (a Firefox/IE
 *   convention curl adopted); any other line starting with "#" is a comment,
 *   including the "# Netscape HTTP Cookie File" header (wget writes
 *   "# HTTP Cookie File").
 * - wget writes "host:port" in the domain field for a non-default port; the port
 *   is dropped on read (RFC 6265 section 8.5: cookies do not isolate by port).
 * - A comment line directly above a cookie's line (no blank line between) is
 *   that cookie's `comment`: usersctl notes there which server set it. curl,
 *   wget and python skip it, and drop it when they rewrite the file.
 */

export interface CookieLine {
  /** Without the leading dot. */
  domain: string;
  /** The TRUE/FALSE "tailmatch" field; a leading dot on the domain in the file. */
  includeSubdomains: boolean;
  path: string;
  secure: boolean;
  /** The "#HttpOnly_" prefix. */
  httpOnly: boolean;
  /** Unix seconds; 0 = session cookie. */
  expires: number;
  name: string;
  value: string;
  /** The text of the comment line directly above the cookie's, without its "#" and the space after it. */
  comment?: string;
}

export const COOKIE_FILE_HEADER = '# Netscape HTTP Cookie File';

const HTTP_ONLY_PREFIX = '#HttpOnly_';
const FORMAT_COMMENT = '# https://curl.se/docs/http-cookies.html - written by usersctl. Edit at your own risk.';

// A hostname (ASCII labels, as tough-cookie and curl store IDNs in punycode), an
// IPv4 address, or an IPv6 address with or without brackets.
const DOMAIN = /^(?:[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*|\[[0-9A-Fa-f:.]+\]|[0-9A-Fa-f]*:[0-9A-Fa-f]*:[0-9A-Fa-f:.]*)$/;
// wget's "host:port" and "[v6]:port"; a bare IPv6 address has more than one colon.
const WITH_PORT = /^([^:]+|\[[^\]]*\]):(\d{1,5})$/;
// RFC 6265 section 4.1.1 is stricter (cookie-name = token); the file rule is only
// what would break the line or the Cookie header: no control characters (which
// include TAB, CR and LF), no whitespace, ";" or "=" in a name, no ";" in a value.
const CONTROL = /[\x00-\x1f\x7f]/;
const BAD_NAME = /[\x00-\x20\x7f;=]/;

/**
 * Reads a cookie file. Never throws: a malformed line is skipped and reported
 * in `warnings` as "line N: why" (N counts from 1).
 */
export function parseCookieFile(text: string): { cookies: CookieLine[]; warnings: string[] } {
  const cookies: CookieLine[] = [];
  const warnings: string[] = [];
  const lines = text.replace(/^\uFEFF/, '').split('\n');
  if (lines.at(-1) === '') lines.pop();
  /** The comment of the line before, when it was a comment line. */
  let comment: string | undefined;
  lines.forEach((raw, index) => {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    const parsed = parseLine(line);
    const above = comment;
    // Only a comment that can be written back (no TAB or other control character) is kept.
    comment =
      parsed === undefined && line.startsWith('#') && !CONTROL.test(line) ? line.replace(/^# ?/, '') : undefined;
    if (parsed === undefined) return;
    if (typeof parsed === 'string') warnings.push(`line ${index + 1}: ${parsed}`);
    else cookies.push(above === undefined ? parsed : { ...parsed, comment: above });
  });
  return { cookies, warnings };
}

/** undefined for a blank or comment line, a string saying why for a malformed one. */
function parseLine(line: string): CookieLine | string | undefined {
  let rest = line;
  let httpOnly = false;
  if (rest.startsWith(HTTP_ONLY_PREFIX)) {
    httpOnly = true;
    rest = rest.slice(HTTP_ONLY_PREFIX.length);
  } else {
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) return undefined;
  }
  const fields = rest.split('\t');
  if (fields.length === 6) fields.push('');
  if (fields.length !== 7) return `expected 7 tab-separated fields, found ${fields.length}`;
  const [rawDomain, tailmatch, path, secure, expires, name, value] = fields as [
    string,
    string,
    string,
    string,
    string,
    string,
    string,
  ];

  let domain = rawDomain.startsWith('.') ? rawDomain.slice(1) : rawDomain;
  const port = WITH_PORT.exec(domain);
  if (port !== null) domain = port[1]!;
  if (!DOMAIN.test(domain)) return `invalid domain ${JSON.stringify(rawDomain)}`;
  const includeSubdomains = flag(tailmatch);
  if (includeSubdomains === undefined)
    return `includeSubdomains must be TRUE or FALSE, not ${JSON.stringify(tailmatch)}`;
  if (!path.startsWith('/') || CONTROL.test(path)) return `invalid path ${JSON.stringify(path)}`;
  const isSecure = flag(secure);
  if (isSecure === undefined) return `secure must be TRUE or FALSE, not ${JSON.stringify(secure)}`;
  // curl writes 2^63-1 when a Max-Age overflows; such a far future is clamped.
  if (!/^\d+$/.test(expires))
    return `expires must be Unix seconds (0 for a session cookie), not ${JSON.stringify(expires)}`;
  const expiry = Math.min(Number(expires), Number.MAX_SAFE_INTEGER);
  if (name === '' || BAD_NAME.test(name)) return `invalid cookie name ${JSON.stringify(name)}`;
  if (CONTROL.test(value) || value.includes(';')) return `invalid value for cookie ${name}`;
  return { domain, includeSubdomains, path, secure: isSecure, httpOnly, expires: expiry, name, value };
}

// curl compares with strcasecompare; python only accepts "TRUE" for true. We
// write upper case, so both read what we write.
function flag(field: string): boolean | undefined {
  const upper = field.toUpperCase();
  return upper === 'TRUE' ? true : upper === 'FALSE' ? false : undefined;
}

/**
 * Writes a cookie file the way curl's cookie_output does: the header, a comment
 * line, a blank line, then one line per cookie, each ending in "\n".
 * Throws a TypeError for a cookie the format cannot carry (a TAB or newline in
 * a field, an empty name, a domain with a leading dot...), so what this writes
 * parses back to the same cookies.
 */
export function formatCookieFile(cookies: readonly CookieLine[]): string {
  let text = `${COOKIE_FILE_HEADER}\n${FORMAT_COMMENT}\n\n`;
  for (const cookie of cookies)
    text += (cookie.comment === undefined ? '' : `# ${cookie.comment}\n`) + formatLine(cookie) + '\n';
  return text;
}

function formatLine(c: CookieLine): string {
  const why = unwritable(c);
  if (why !== undefined)
    throw new TypeError(
      `cannot write cookie ${JSON.stringify(c.name)} for ${JSON.stringify(c.domain)} to a cookie file: ${why}`,
    );
  return [
    (c.httpOnly ? HTTP_ONLY_PREFIX : '') + (c.includeSubdomains ? '.' : '') + c.domain,
    c.includeSubdomains ? 'TRUE' : 'FALSE',
    c.path,
    c.secure ? 'TRUE' : 'FALSE',
    String(c.expires),
    c.name,
    c.value,
  ].join('\t');
}

function unwritable(c: CookieLine): string | undefined {
  if (!DOMAIN.test(c.domain) || WITH_PORT.test(c.domain))
    return 'invalid domain (give it without a leading dot or port)';
  if (!c.path.startsWith('/') || CONTROL.test(c.path))
    return 'the path must start with "/" and hold no control characters';
  if (!Number.isSafeInteger(c.expires) || c.expires < 0)
    return 'expires must be a non-negative integer of Unix seconds';
  if (c.name === '' || BAD_NAME.test(c.name))
    return 'the name must be non-empty, without whitespace, control characters, ";" or "="';
  if (CONTROL.test(c.value) || c.value.includes(';'))
    return 'the value may not hold control characters (TAB, CR, LF...) or ";"';
  if (c.comment !== undefined && CONTROL.test(c.comment))
    return 'the comment may not hold control characters (TAB, CR, LF...)';
  return undefined;
}
