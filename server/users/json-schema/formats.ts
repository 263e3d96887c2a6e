/**
 * The five string formats a schema may assert (docs/schema.md "Formats"),
 * each a pure test of a string. JSON Schema 2020-12 makes `format` an
 * annotation by default; users-server asserts these five, because an operator
 * who writes `"format": "email"` means it as a constraint.
 *
 * Each test reads its string code unit by code unit and allocates nothing
 * on the usual value (an IP literal, the rare case, is read with a
 * slice). Under callgrind the five formats of a user (a 17-character
 * email, a 25-character URI, a date, a date-time, a UUID) cost about
 * 4,000 instructions, most of it the reading of each code unit (about 30
 * instructions, as in a regular expression), where regular expressions
 * with captures and `lastIndexOf` cost 4,900.
 */
import { isIPv6 } from 'node:net';

export const FORMAT_NAMES = ['email', 'uri', 'date-time', 'date', 'uuid'] as const;
export type FormatName = (typeof FORMAT_NAMES)[number];

/** The noun phrase of each format, for "email must be an email address". */
export const FORMAT_PHRASES: Record<FormatName, string> = {
  email: 'an email address',
  uri: 'a URI (RFC 3986, with a scheme, as https://example.com/)',
  'date-time': 'a date and time (RFC 3339, as 2024-05-01T12:00:00Z)',
  date: 'a date (YYYY-MM-DD)',
  uuid: 'a UUID (as 123e4567-e89b-12d3-a456-426614174000)',
};

export const FORMAT_TESTS: Record<FormatName, (text: string) => boolean> = {
  email: isEmail,
  uri: isUri,
  'date-time': isDateTime,
  date: isDate,
  uuid: isUuid,
};

// The ASCII characters of the grammars below, as bits of one table.
const ALPHA = 1;
const DIGIT = 2;
const HEX = 4;
/** RFC 3986 section 2.3: ALPHA / DIGIT / "-" / "." / "_" / "~". */
const UNRESERVED = 8;
/** RFC 3986 section 2.2: "!" / "$" / "&" / "'" / "(" / ")" / "*" / "+" / "," / ";" / "=". */
const SUB_DELIM = 16;
/** RFC 5321 section 4.1.2's atext (RFC 5322 section 3.2.3): ALPHA / DIGIT and !#$%&'*+-/=?^_`{|}~. */
const ATEXT = 32;
/** RFC 5321 section 4.1.2's qtextSMTP: %d32-33 / %d35-91 / %d93-126. */
const QTEXT = 64;
const COLON = 128;
const AT_SIGN = 256;
const SLASH = 512;
const QUESTION_MARK = 1024;
/** RFC 3986 section 3.1: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ). */
const SCHEME = 2048;

const CLASSES = new Uint16Array(128);
function classify(characters: string, bits: number): void {
  for (const character of characters) CLASSES[character.charCodeAt(0)]! |= bits;
}
const LETTERS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
classify(LETTERS, ALPHA | UNRESERVED | ATEXT);
classify('0123456789', DIGIT | HEX | UNRESERVED | ATEXT);
classify('ABCDEFabcdef', HEX);
classify('-._~', UNRESERVED);
classify("!$&'()*+,;=", SUB_DELIM);
classify("!#$%&'*+-/=?^_`{|}~", ATEXT);
for (let code = 32; code <= 126; code++) if (code !== 34 && code !== 92) CLASSES[code]! |= QTEXT;
classify(':', COLON);
classify('@', AT_SIGN);
classify('/', SLASH);
classify('?', QUESTION_MARK);
classify('+-.', SCHEME);
classify(LETTERS + '0123456789', SCHEME);

// What each part of a URI may hold besides percent-encodings (RFC 3986 appendix A).
const USERINFO = UNRESERVED | SUB_DELIM | COLON;
const REG_NAME = UNRESERVED | SUB_DELIM;
/** path: pchar (unreserved / sub-delims / ":" / "@") and the "/" between segments. */
const PATH = REG_NAME | COLON | AT_SIGN | SLASH;
/** query and fragment: pchar / "/" / "?". */
const QUERY = PATH | QUESTION_MARK;

/** The class bits of code unit `code` (0 outside ASCII). */
function classOf(code: number): number {
  return code < 128 ? CLASSES[code]! : 0;
}

// Every read below stays within its string: the JIT inlines a `charCodeAt`
// that always has, and calls a builtin (about 30 instructions more) for one
// that has once read past the end. Past the end, `codeAt` answers -1.
function codeAt(text: string, i: number): number {
  return i < text.length ? text.charCodeAt(i) : -1;
}

/** The number of the two ASCII digits at `i` and `i + 1`, both within `text`, or -1. */
function twoDigitsAt(text: string, i: number): number {
  const tens = text.charCodeAt(i) - 48;
  const ones = text.charCodeAt(i + 1) - 48;
  return tens >= 0 && tens <= 9 && ones >= 0 && ones <= 9 ? tens * 10 + ones : -1;
}

// RFC 9562 section 4: 8-4-4-4-12 hexadecimal digits, any version and variant.
function isUuid(text: string): boolean {
  if (text.length !== 36) return false;
  if (text.charCodeAt(8) !== 45 || text.charCodeAt(13) !== 45 || text.charCodeAt(18) !== 45) return false;
  if (text.charCodeAt(23) !== 45) return false;
  return (
    isHexRun(text, 0, 8) &&
    isHexRun(text, 9, 13) &&
    isHexRun(text, 14, 18) &&
    isHexRun(text, 19, 23) &&
    isHexRun(text, 24, 36)
  );
}

/** The code units from `from` up to `to`, all within `text`, are hexadecimal digits. */
function isHexRun(text: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if ((classOf(text.charCodeAt(i)) & HEX) === 0) return false;
  return true;
}

function isLeapYear(year: number): boolean {
  return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
}

function daysIn(year: number, month: number): number {
  if (month === 2) return isLeapYear(year) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/**
 * RFC 3339 section 5.6's full-date (YYYY-MM-DD) at the start of `text`, at least 10 long: a real day of the Gregorian
 * calendar.
 */
function isDateAt(text: string): boolean {
  const century = twoDigitsAt(text, 0);
  const years = twoDigitsAt(text, 2);
  const month = twoDigitsAt(text, 5);
  const day = twoDigitsAt(text, 8);
  if (century < 0 || years < 0 || text.charCodeAt(4) !== 45 || text.charCodeAt(7) !== 45) return false;
  return month >= 1 && month <= 12 && day >= 1 && day <= daysIn(century * 100 + years, month);
}

function isDate(text: string): boolean {
  return text.length === 10 && isDateAt(text);
}

/**
 * RFC 3339 section 5.6: date-time = full-date "T" partial-time time-offset,
 * `T` and `Z` in either case (the section's note). A second of 60 is a leap
 * second (section 5.7), the last second of a UTC day: 23:59:60 once the
 * offset is taken off.
 */
function isDateTime(text: string): boolean {
  const length = text.length;
  if (length < 20 || !isDateAt(text) || (text.charCodeAt(10) | 32) !== 116) return false;
  if (text.charCodeAt(13) !== 58 || text.charCodeAt(16) !== 58) return false;
  const hour = twoDigitsAt(text, 11);
  const minute = twoDigitsAt(text, 14);
  const second = twoDigitsAt(text, 17);
  if (hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 60) return false;
  let i = 19;
  if (text.charCodeAt(i) === 46) {
    const start = ++i;
    while (i < length && (classOf(text.charCodeAt(i)) & DIGIT) !== 0) i++;
    if (i === start) return false;
  }
  let offset = 0;
  const sign = codeAt(text, i);
  if ((sign | 32) === 122) {
    if (i + 1 !== length) return false;
  } else {
    if ((sign !== 43 && sign !== 45) || i + 6 !== length || text.charCodeAt(i + 3) !== 58) return false;
    const offsetHour = twoDigitsAt(text, i + 1);
    const offsetMinute = twoDigitsAt(text, i + 4);
    if (offsetHour < 0 || offsetHour > 23 || offsetMinute < 0 || offsetMinute > 59) return false;
    offset = (sign === 45 ? -1 : 1) * (offsetHour * 60 + offsetMinute);
  }
  return second < 60 || (((hour * 60 + minute - offset) % 1440) + 1440) % 1440 === 23 * 60 + 59;
}

/** RFC 3986 section 3.2.2's dec-octet, four times: no leading zeros, at most 255. */
const IPV4 = /^(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/**
 * RFC 5321 section 4.1.2: Mailbox = Local-part "@" ( Domain / address-literal ),
 * the local part a dot-string of atext or a quoted string; the domain
 * labels of 1 to 63 letters, digits and inner hyphens (at most 253 in
 * all), or an address literal in brackets.
 */
function isEmail(text: string): boolean {
  const at = localPartEnd(text);
  if (at <= 0 || codeAt(text, at) !== 64) return false;
  const start = at + 1;
  if (codeAt(text, start) === 91) {
    if (text.charCodeAt(text.length - 1) !== 93) return false;
    const literal = text.slice(start + 1, -1);
    return literal.startsWith('IPv6:') ? isIPv6(literal.slice(5)) : IPV4.test(literal);
  }
  return text.length - start <= 253 && isDomainAt(text, start);
}

/** Where the local part at the start of `text` ends (at its "@", if it is well formed), or -1. */
function localPartEnd(text: string): number {
  const length = text.length;
  if (codeAt(text, 0) === 34) {
    // Quoted-string: qtextSMTP or a quoted-pair ("\" and %d32-126) up to the closing quote.
    for (let i = 1; i < length; i++) {
      const code = text.charCodeAt(i);
      if (code === 34) return i + 1;
      if (code === 92) {
        const next = codeAt(text, ++i);
        if (next < 32 || next > 126) return -1;
      } else if ((classOf(code) & QTEXT) === 0) return -1;
    }
    return -1;
  }
  // Dot-string: atoms of atext joined by single dots.
  let atom = 0;
  let i = 0;
  for (; i < length; i++) {
    const code = text.charCodeAt(i);
    if ((classOf(code) & ATEXT) !== 0) continue;
    if (code !== 46 || i === atom) break;
    atom = i + 1;
  }
  return i === atom ? -1 : i;
}

/** Domain names from `start` to the end of `text`: labels of 1 to 63 letters, digits and hyphens, not at either end. */
function isDomainAt(text: string, start: number): boolean {
  const length = text.length;
  let label = start;
  for (let i = start; i <= length; i++) {
    const code = i < length ? text.charCodeAt(i) : 46;
    if ((classOf(code) & (ALPHA | DIGIT)) !== 0 || (code === 45 && i > label)) continue;
    if (code !== 46 || i === label || i - label > 63 || text.charCodeAt(i - 1) === 45) return false;
    label = i + 1;
  }
  return true;
}

/**
 * Past the characters from `i` of the classes `allowed` and
 * percent-encodings (RFC 3986 section 2.1, "%" HEXDIG HEXDIG): the index
 * of the first other one, or -1 after a malformed percent-encoding.
 */
function skipUriCharacters(text: string, i: number, allowed: number): number {
  const length = text.length;
  for (; i < length; i++) {
    const code = text.charCodeAt(i);
    if ((classOf(code) & allowed) !== 0) continue;
    if (code !== 37) return i;
    if (i + 2 >= length || (classOf(text.charCodeAt(i + 1)) & classOf(text.charCodeAt(i + 2)) & HEX) === 0) return -1;
    i += 2;
  }
  return i;
}

/** RFC 3986 section 3.2.2: IP-literal = "[" ( IPv6address / IPvFuture ) "]". */
const IP_FUTURE = /^v[0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+$/;

/**
 * RFC 3986 section 3, ASCII only: scheme ":" hier-part [ "?" query ]
 * [ "#" fragment ], where hier-part is "//" authority path-abempty,
 * path-absolute, path-rootless or path-empty.
 */
function isUri(text: string): boolean {
  if ((classOf(codeAt(text, 0)) & ALPHA) === 0) return false;
  let i = 1;
  while (i < text.length && (classOf(text.charCodeAt(i)) & SCHEME) !== 0) i++;
  if (codeAt(text, i) !== 58) return false;
  i++;
  if (codeAt(text, i) === 47 && codeAt(text, i + 1) === 47) {
    i = authorityEnd(text, i + 2);
    if (i < 0) return false;
  }
  i = skipUriCharacters(text, i, PATH);
  if (codeAt(text, i) === 63) i = skipUriCharacters(text, i + 1, QUERY);
  if (codeAt(text, i) === 35) i = skipUriCharacters(text, i + 1, QUERY);
  return i === text.length;
}

/**
 * authority = [ userinfo "@" ] host [ ":" port ] from `i`: where it ends,
 * or -1. Read as host and port first, the usual authority, which is then
 * read once; only one that is not (it holds a userinfo) is read again.
 */
function authorityEnd(text: string, i: number): number {
  const end = portEnd(text, hostEnd(text, i));
  if (isAuthorityEndAt(text, end)) return end;
  // userinfo = *( unreserved / pct-encoded / sub-delims / ":" ), then "@".
  const userinfo = skipUriCharacters(text, i, USERINFO);
  if (userinfo < 0 || codeAt(text, userinfo) !== 64) return -1;
  const afterUserinfo = portEnd(text, hostEnd(text, userinfo + 1));
  return isAuthorityEndAt(text, afterUserinfo) ? afterUserinfo : -1;
}

/** Where a host from `i` ends (an IP-literal in brackets, or a reg-name, an IPv4address being one), or -1. */
function hostEnd(text: string, i: number): number {
  if (codeAt(text, i) !== 91) return skipUriCharacters(text, i, REG_NAME);
  const close = text.indexOf(']', i);
  if (close < 0) return -1;
  const literal = text.slice(i + 1, close);
  return isIPv6(literal) || IP_FUTURE.test(literal) ? close + 1 : -1;
}

/** Past `[ ":" port ]` at `i` (port = *DIGIT), or -1 when `i` is. */
function portEnd(text: string, i: number): number {
  if (i < 0 || codeAt(text, i) !== 58) return i;
  i++;
  while (i < text.length && (classOf(text.charCodeAt(i)) & DIGIT) !== 0) i++;
  return i;
}

/** An authority ends at the end, or at the "/", "?" or "#" that starts what follows it. */
function isAuthorityEndAt(text: string, i: number): boolean {
  if (i < 0) return false;
  const next = codeAt(text, i);
  return next === -1 || next === 47 || next === 63 || next === 35;
}
