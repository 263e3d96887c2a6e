/**
 * Strings compared as sequences of Unicode code points (API.md "Finding
 * users": "strings by code points, never UTF-16 units"). JavaScript's `<`
 * and `includes` work on UTF-16 units, which put U+1F600 (units D83D DE00)
 * before U+FFFD, and find a lone surrogate inside a pair. A lone surrogate
 * counts as the code point of its own value.
 */

function isHigh(unit: number): boolean {
  return unit >= 0xd800 && unit <= 0xdbff;
}

function isLow(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff;
}

/** -1, 0 or 1 as `a` sorts before, with or after `b` by code points. */
export function compareCodePoints(a: string, b: string): number {
  const shorter = Math.min(a.length, b.length);
  for (let i = 0; i < shorter; i++) {
    const [x, y] = [a.charCodeAt(i), b.charCodeAt(i)];
    if (x === y) continue;
    // A low surrogate after the equal high one makes a pair: the code points differ from one unit back.
    const start = i > 0 && isHigh(a.charCodeAt(i - 1)) && (isLow(x) || isLow(y)) ? i - 1 : i;
    return a.codePointAt(start)! < b.codePointAt(start)! ? -1 : 1;
  }
  return Math.sign(a.length - b.length);
}

/** True when `needle`, found at unit `at` of `text`, starts and ends on code point boundaries. */
function onBoundaries(text: string, needle: string, at: number): boolean {
  if (needle.length === 0) return true;
  const splitsBefore = isLow(needle.charCodeAt(0)) && at > 0 && isHigh(text.charCodeAt(at - 1));
  const end = at + needle.length;
  const splitsAfter = isHigh(needle.charCodeAt(needle.length - 1)) && isLow(text.charCodeAt(end));
  return !splitsBefore && !splitsAfter;
}

/** `co`: the code points of `needle` occur in `text`. */
export function containsCodePoints(text: string, needle: string): boolean {
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + 1)) {
    if (onBoundaries(text, needle, at)) return true;
  }
  return false;
}

/** `sw`: `text` starts with the code points of `needle`. */
export function startsWithCodePoints(text: string, needle: string): boolean {
  return text.startsWith(needle) && onBoundaries(text, needle, 0);
}

/** `ew`: `text` ends with the code points of `needle`. */
export function endsWithCodePoints(text: string, needle: string): boolean {
  return text.endsWith(needle) && onBoundaries(text, needle, text.length - needle.length);
}

/** The number of code points of `text`: a surrogate pair counts once, a lone surrogate once. */
export function countCodePoints(text: string): number {
  let count = text.length;
  for (let i = 1; i < text.length; i++) if (isLow(text.charCodeAt(i)) && isHigh(text.charCodeAt(i - 1))) count--;
  return count;
}
