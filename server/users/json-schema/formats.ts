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

// RFC 3339 section 5.6: full-date, and date-time with a required offset; `T` and `Z` in either case.
const FULL_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

function isLeapYear(year: number): boolean {
  return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
}

function daysIn(year: number, month: number): number {
  if (month === 2) return isLeapYear(year) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

function isDayOf(year: number, month: number, day: number): boolean {
  return month >= 1 && month <= 12 && day >= 1 && day <= daysIn(year, month);
}

function isDate(text: string): boolean {
  const match = FULL_DATE.exec(text);
  return match !== null && isDayOf(Number(match[1]), Number(match[2]), Number(match[3]));
}

function isDateTime(text: string): boolean {
  const match = DATE_TIME.exec(text);
  if (match === null || !isDayOf(Number(match[1]), Number(match[2]), Number(match[3]))) return false;
  const [hour, minute, second] = [Number(match[4]), Number(match[5]), Number(match[6])];
  const [offsetHour, offsetMinute] = [Number(match[8] ?? 0), Number(match[9] ?? 0)];
  if (hour > 23 || minute > 59 || second > 60 || offsetHour > 23 || offsetMinute > 59) return false;
  if (second < 60) return true;
  // A leap second (RFC 3339 section 5.7) is the last second of a UTC day: 23:59:60 once the offset is taken off.
  const offset = (match[7] === '-' ? -1 : 1) * (offsetHour * 60 + offsetMinute);
  return (((hour * 60 + minute - offset) % 1440) + 1440) % 1440 === 23 * 60 + 59;
}

// RFC 5321 section 4.1.2: a dot-atom or a quoted string, then a domain or an address literal.
const DOT_ATOM_LOCAL = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
const QUOTED_LOCAL = /^"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"$/;
const DOMAIN = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const IPV4 = /^(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

function isEmail(text: string): boolean {
  const at = text.lastIndexOf('@');
  if (at < 1 || at === text.length - 1) return false;
  const [local, domain] = [text.slice(0, at), text.slice(at + 1)];
  if (!DOT_ATOM_LOCAL.test(local) && !QUOTED_LOCAL.test(local)) return false;
  if (domain.startsWith('[') && domain.endsWith(']')) {
    const literal = domain.slice(1, -1);
    return literal.startsWith('IPv6:') ? isIPv6(literal.slice(5)) : IPV4.test(literal);
  }
  return domain.length <= 253 && DOMAIN.test(domain);
}

// RFC 3986 appendix A, ASCII only: unreserved / pct-encoded / sub-delims and the characters each part adds.
const PCT = '%[0-9A-Fa-f]{2}';
const SUB = "A-Za-z0-9\\-._~!$&'()*+,;=";
const PCHAR = `(?:[${SUB}:@]|${PCT})`;
const URI = new RegExp(
  `^[A-Za-z][A-Za-z0-9+.-]*:` +
    `(?://((?:[${SUB}:]|${PCT})*@)?(\\[[^\\]]*\\]|(?:[${SUB}]|${PCT})*)(?::\\d*)?(?:/${PCHAR}*)*` +
    `|/(?:${PCHAR}+(?:/${PCHAR}*)*)?` +
    `|${PCHAR}+(?:/${PCHAR}*)*` +
    `|)` +
    `(?:\\?(?:${PCHAR}|[/?])*)?(?:#(?:${PCHAR}|[/?])*)?$`,
);
const IP_FUTURE = new RegExp(`^v[0-9A-Fa-f]+\\.[${SUB}:]+$`);

function isUri(text: string): boolean {
  const match = URI.exec(text);
  if (match === null) return false;
  const host = match[2];
  if (host === undefined || !host.startsWith('[')) return true;
  const literal = host.slice(1, -1);
  return isIPv6(literal) || IP_FUTURE.test(literal);
}
