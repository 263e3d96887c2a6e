/**
 * Text for a man page (roff), escaped once for both programs' pages: a
 * backslash is an escape, a hyphen is typeset as a minus sign only when
 * escaped, and a line starting with . or ' would be a request.
 */
export function roff(text: string): string {
  return text.replaceAll('\\', '\\e').replaceAll('-', '\\-').replace(/^[.']/gm, '\\&$&');
}
