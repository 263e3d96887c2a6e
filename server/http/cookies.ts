/**
 * Cookie header parsing and Set-Cookie serialization (RFC 6265).
 */

/**
 * Every value the Cookie header carries for `name`, in header order.
 * RFC 6265 section 4.2.1: cookie-string = cookie-pair *( ";" SP cookie-pair ).
 * Parsed leniently as section 5.4 user agents may send: pairs split on ";",
 * surrounding whitespace trimmed, a DQUOTEd value unquoted.
 */
export function cookieValues(header: string | undefined, name: string): string[] {
  const values: string[] = [];
  if (header === undefined || header === '') return values;
  let start = 0;
  while (start < header.length) {
    let end = header.indexOf(';', start);
    if (end === -1) end = header.length;
    const eq = header.indexOf('=', start);
    if (eq !== -1 && eq < end && header.slice(start, eq).trim() === name) {
      let value = header.slice(eq + 1, end).trim();
      if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
      values.push(value);
    }
    start = end + 1;
  }
  return values;
}

interface CookieAttributes {
  maxAge: number;
  secure: boolean;
  /** `/` unless given. */
  path?: string;
  /** `Lax` unless given. */
  sameSite?: 'Lax' | 'Strict';
}

/** A Set-Cookie value for an HttpOnly cookie, the session's by default (RFC 6265 section 4.1); `maxAge` 0 clears it. */
export function serializeCookie(name: string, value: string, attributes: CookieAttributes): string {
  let cookie = `${name}=${value}; Path=${attributes.path ?? '/'}; HttpOnly; SameSite=${attributes.sameSite ?? 'Lax'}; Max-Age=${attributes.maxAge}`;
  if (attributes.maxAge === 0) cookie += '; Expires=Thu, 01 Jan 1970 00:00:00 GMT';
  if (attributes.secure) cookie += '; Secure';
  return cookie;
}
