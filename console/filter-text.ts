/**
 * What the filter box sends: a filter of the server's syntax as typed, or,
 * for plain words, a filter that finds each word (`co`) in the name or in a
 * declared path. Pure: no page, so the tests run it in node too.
 */

import { parseRef } from '../shared/user.js';

/** The server's bound on the conditions of a filter (docs/api.md "The filter"). */
const MAX_CONDITIONS = 32;

/**
 * Whether `text` is written in the filter syntax: it starts (after any
 * `not (` and parentheses) with a path followed by an operator, `pr` or a
 * `[`. Anything else is plain words.
 */
function isFilterSyntax(text: string): boolean {
  return /^\s*(?:not\s*)?[(\s]*[A-Za-z_][A-Za-z0-9_.-]*(?:\[|\s+(?:eq|ne|co|sw|ew|gt|ge|lt|le)\s|\s+pr(?:\s|\)|$))/i.test(
    text,
  );
}

/** The words of plain text, each once, as many as the filter's bound on conditions allows. */
function wordsOf(text: string, paths: number): string[] {
  const words = [...new Set(text.split(/\s+/).filter((word) => word !== ''))];
  return words.slice(0, Math.max(1, Math.floor(MAX_CONDITIONS / paths)));
}

/**
 * The filter to send for the box's text: the text itself when it is in the
 * filter syntax; for plain words, every word contained (`co`) in `name` or
 * one of the `declared` paths; undefined for an empty box.
 */
export function filterFor(text: string, declared: readonly string[]): string | undefined {
  if (text.trim() === '') return undefined;
  if (isFilterSyntax(text)) return text.trim();
  const paths = ['name', ...declared.filter((path) => path !== 'name' && path !== 'id')];
  const terms = wordsOf(text, paths.length).map((word) => {
    const any = paths.map((path) => `${path} co ${JSON.stringify(word)}`).join(' or ');
    return paths.length === 1 ? any : `(${any})`;
  });
  return terms.join(' and ');
}

/** The reference the box's text may name (one plain word: an id or an alias), looked up as well; else undefined. */
export function referenceIn(text: string): string | undefined {
  const word = text.trim();
  if (word === '' || isFilterSyntax(word) || /[%\s]/.test(word)) return undefined;
  const kind = parseRef(word).kind;
  return kind === 'id' || kind === 'alias' ? word : undefined;
}
