/**
 * The five string formats a schema may assert (docs/schema.md "Formats"),
 * each a pure test of a string. JSON Schema 2020-12 makes `format` an
 * annotation by default; users-server asserts these five, because an operator
 * who writes `"format": "email"` means it as a constraint.
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
  uuid: (text) => UUID.test(text),
};

// RFC 4122 section 3: 8-4-4-4-12 hexadecimal digits, any version and variant.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

// RFC 3339 section 5.6, read digit by digit: a valid value allocates nothing (no match array, no substrings).

/** The number written by the ASCII digits at `from` up to `to` of `text`, or -1 if one is not a digit. */
function digitsAt(text: string, from: number, to: number): number {
  let value = 0;
  for (let i = from; i < to; i++) {
    const digit = text.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return -1;
    value = value * 10 + digit;
  }
  return value;
}

function isLeapYear(year: number): boolean {
  return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
}

function daysIn(year: number, month: number): number {
  if (month === 2) return isLeapYear(year) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** full-date (YYYY-MM-DD) at the start of `text`, a real day of the Gregorian calendar. */
function isDateAt(text: string): boolean {
  if (text.length < 10 || text.charCodeAt(4) !== 45 || text.charCodeAt(7) !== 45) return false;
  const year = digitsAt(text, 0, 4);
  const month = digitsAt(text, 5, 7);
  const day = digitsAt(text, 8, 10);
  return year >= 0 && month >= 1 && month <= 12 && day >= 1 && day <= daysIn(year, month);
}

function isDate(text: string): boolean {
  return text.length === 10 && isDateAt(text);
}

/** The code unit at `i` is `:`. */
function colonAt(text: string, i: number): boolean {
  return text.charCodeAt(i) === 58;
}

// date-time = full-date "T" partial-time time-offset; "T" and "Z" in either case (section 5.6, note).
function isDateTime(text: string): boolean {
  if (text.length < 20 || !isDateAt(text) || (text[10] !== 'T' && text[10] !== 't')) return false;
  if (!colonAt(text, 13) || !colonAt(text, 16)) return false;
  const hour = digitsAt(text, 11, 13);
  const minute = digitsAt(text, 14, 16);
  const second = digitsAt(text, 17, 19);
  if (hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 60) return false;
  let i = 19;
  if (text[i] === '.') {
    const start = ++i;
    while (i < text.length && digitsAt(text, i, i + 1) >= 0) i++;
    if (i === start) return false;
  }
  let offset = 0;
  if (text[i] === 'Z' || text[i] === 'z') {
    if (i + 1 !== text.length) return false;
  } else {
    const sign = text[i] === '+' ? 1 : text[i] === '-' ? -1 : 0;
    if (sign === 0 || i + 6 !== text.length || !colonAt(text, i + 3)) return false;
    const offsetHour = digitsAt(text, i + 1, i + 3);
    const offsetMinute = digitsAt(text, i + 4, i + 6);
    if (offsetHour < 0 || offsetHour > 23 || offsetMinute < 0 || offsetMinute > 59) return false;
    offset = sign * (offsetHour * 60 + offsetMinute);
  }
  if (second < 60) return true;
  // A leap second (section 5.7) is the last second of a UTC day: 23:59:60 once the offset is taken off.
  return (((hour * 60 + minute - offset) % 1440) + 1440) % 1440 === 23 * 60 + 59;
}

// RFC 5321 section 4.1.2: a dot-atom or a quoted string, then a domain (labels of at most 63 letters,
// digits and inner hyphens) or an address literal. The common form is one regular expression test.
const ATOM = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
const LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
const DOMAIN = `${LABEL}(?:\\.${LABEL})*`;
const SIMPLE_EMAIL = new RegExp(`^${ATOM}(?:\\.${ATOM})*@${DOMAIN}$`);
const DOT_ATOM_LOCAL = new RegExp(`^${ATOM}(?:\\.${ATOM})*$`);
const QUOTED_LOCAL = /^"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"$/;
const DOMAIN_ONLY = new RegExp(`^${DOMAIN}$`);
const IPV4 = /^(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

function isEmail(text: string): boolean {
  const at = text.lastIndexOf('@');
  if (at < 1 || at === text.length - 1 || text.length - at - 1 > 253) return false;
  if (SIMPLE_EMAIL.test(text)) return true;
  const [local, domain] = [text.slice(0, at), text.slice(at + 1)];
  if (!DOT_ATOM_LOCAL.test(local) && !QUOTED_LOCAL.test(local)) return false;
  if (domain.startsWith('[') && domain.endsWith(']')) {
    const literal = domain.slice(1, -1);
    return literal.startsWith('IPv6:') ? isIPv6(literal.slice(5)) : IPV4.test(literal);
  }
  return DOMAIN_ONLY.test(domain);
}

// RFC 3986 appendix A, ASCII only: scheme ":" hier-part ["?" query] ["#" fragment], where hier-part is
// "//" authority path-abempty, path-absolute, path-rootless or path-empty.
const PCT = '%[0-9A-Fa-f]{2}';
const SUB = "A-Za-z0-9\\-._~!$&'()*+,;=";
const PCHAR = `(?:[${SUB}:@]|${PCT})`;
const uriWith = (host: string) =>
  new RegExp(
    `^[A-Za-z][A-Za-z0-9+.-]*:` +
      `(?://(?:(?:[${SUB}:]|${PCT})*@)?${host}(?::\\d*)?(?:/${PCHAR}*)*` +
      `|/(?:${PCHAR}+(?:/${PCHAR}*)*)?` +
      `|${PCHAR}+(?:/${PCHAR}*)*` +
      `|)` +
      `(?:\\?(?:${PCHAR}|[/?])*)?(?:#(?:${PCHAR}|[/?])*)?$`,
  );
const URI = uriWith(`(?:[${SUB}]|${PCT})*`);
const URI_IP_LITERAL = uriWith('\\[([^\\]]*)\\]');
const IP_FUTURE = new RegExp(`^v[0-9A-Fa-f]+\\.[${SUB}:]+$`);

function isUri(text: string): boolean {
  if (URI.test(text)) return true;
  // An IP-literal host ([2001:db8::7]) is the rare case, read with a capture.
  const literal = URI_IP_LITERAL.exec(text)?.[1];
  return literal !== undefined && (isIPv6(literal) || IP_FUTURE.test(literal));
}
