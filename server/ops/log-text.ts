/**
 * Client-supplied text (an account name tried at login) made safe for one
 * line of the operational log (docs/operations.md "Logins"). The access
 * log's request target is bytes, not text, and has its own escaping
 * (access-log.ts `escapeTarget`).
 */

/** Longest client-supplied text logged, in characters: the longest account name that can exist. */
const MAX_LOGGED_TEXT = 64;

/**
 * Characters a terminal or log viewer could act on instead of showing:
 * controls (C0, DEL, C1: Cc), format characters (Cf: the bidirectional
 * controls U+061C, U+200E/F, U+202A-U+202E, U+2066-U+2069, zero-width
 * characters, U+FEFF), the line and paragraph separators (Zl, Zp), lone
 * surrogates (Cs), and the quote and backslash of the JSON string.
 */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}"\\]/u;
const UNSAFE_ALL = new RegExp(UNSAFE.source, 'gu');

/**
 * `text` as a JSON string literal, quotes included: JSON.parse gives the
 * text back. Its first MAX_LOGGED_TEXT characters (code points) are kept;
 * past them "..." stands for the rest, so a cut name (67 characters) is
 * never one that can exist. Every UNSAFE character is written as `\uXXXX`
 * (`\"` and `\\` for the quote and backslash), so the line holds no
 * character that could end it, forge another or reorder what is shown.
 */
export function quoteLogText(text: string, max = MAX_LOGGED_TEXT): string {
  const kept = firstCodePoints(text, max);
  const cut = kept.length < text.length ? '...' : '';
  if (!UNSAFE.test(kept)) return `"${kept}${cut}"`;
  return `"${kept.replace(UNSAFE_ALL, escapeCharacter)}${cut}"`;
}

/** The first `count` code points of `text`: a surrogate pair is never split. */
function firstCodePoints(text: string, count: number): string {
  let end = 0;
  for (let i = 0; i < count && end < text.length; i++) end += (text.codePointAt(end) ?? 0) > 0xffff ? 2 : 1;
  return text.slice(0, end);
}

function escapeCharacter(character: string): string {
  if (character === '"' || character === '\\') return '\\' + character;
  let out = '';
  // A character past U+FFFF (a Cf tag character, say) is two UTF-16 units: JSON writes each as \uXXXX.
  for (let i = 0; i < character.length; i++)
    out += '\\u' + character.charCodeAt(i).toString(16).toUpperCase().padStart(4, '0');
  return out;
}
