/**
 * Media types (RFC 9110 section 8.3.1): the one place a Content-Type is
 * parsed. (The problem and metrics types live with their formats:
 * shared/problems.ts, ops/metrics.ts.)
 */

export const JSON_TYPE = 'application/json';

/** The type/subtype of a Content-Type field, lower-cased, without parameters; "" when absent. */
function mediaTypeOf(field: string | undefined): string {
  if (field === undefined) return '';
  const semicolon = field.indexOf(';');
  return (semicolon === -1 ? field : field.slice(0, semicolon)).trim().toLowerCase();
}

/** The value of parameter `name` (lower-cased, unquoted), or undefined. */
function parameterOf(field: string, name: string): string | undefined {
  const semicolon = field.indexOf(';');
  if (semicolon === -1) return undefined;
  for (const parameter of field.slice(semicolon + 1).split(';')) {
    const eq = parameter.indexOf('=');
    if (eq === -1 || parameter.slice(0, eq).trim().toLowerCase() !== name) continue;
    return parameter
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .toLowerCase();
  }
  return undefined;
}

/** `application/json` or any `+json` type (RFC 6839), in UTF-8. */
export function isJsonType(field: string | undefined): boolean {
  // What nearly every client sends, answered without parsing.
  if (field === JSON_TYPE) return true;
  const type = mediaTypeOf(field);
  if (type !== JSON_TYPE && !(type.startsWith('application/') && type.endsWith('+json'))) return false;
  const charset = parameterOf(field!, 'charset');
  return charset === undefined || charset === 'utf-8' || charset === 'utf8';
}

/**
 * `type` (lower-case, e.g. `application/merge-patch+json`) in UTF-8, the only charset a JSON text has (RFC 8259 section
 * 8.1).
 */
export function isUtf8Type(field: string | undefined, type: string): boolean {
  // What a client sends nearly always, answered without parsing.
  if (field === type) return true;
  if (mediaTypeOf(field) !== type) return false;
  const charset = parameterOf(field!, 'charset');
  return charset === undefined || charset === 'utf-8' || charset === 'utf8';
}

const URL_ENCODED_FORM = 'application/x-www-form-urlencoded';

// The Content-Types an HTML form (or a CORS "simple" request) can send
// cross-site without a preflight (Fetch standard, CORS-safelisted request-header).
const FORM_TYPES: ReadonlySet<string> = new Set([URL_ENCODED_FORM, 'multipart/form-data', 'text/plain']);

/** True for `application/x-www-form-urlencoded`, the encoding of the sign-in page's forms. */
export function isUrlEncodedForm(field: string | undefined): boolean {
  return mediaTypeOf(field) === URL_ENCODED_FORM;
}

/** True for any of the three encodings an HTML form can send, so a page of another site can. */
export function isFormEncoding(field: string | undefined): boolean {
  return FORM_TYPES.has(mediaTypeOf(field));
}
