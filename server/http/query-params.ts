/**
 * The parameters of a request's query, read exactly as `URLSearchParams`
 * reads them (WHATWG URL, application/x-www-form-urlencoded parsing), for
 * the three questions the routes ask: `has`, `get` and `getAll`.
 *
 * Split here and decoded by `decodeURIComponent`, a find's query costs
 * about 900 instructions less than through `URLSearchParams`, whose C++
 * parser is reached through the embedder's API (1.4 % of a GET by id;
 * docs/performance.md "Finding users"). Where `decodeURIComponent` would
 * read a piece differently (a `%` not followed by two hex digits, bytes that
 * are not UTF-8, a lone surrogate), `URLSearchParams` reads the whole query.
 */

export class QueryParams {
  private readonly values: Map<string, string[]>;

  constructor(query: string) {
    // A lone surrogate `URLSearchParams` reads as U+FFFD, `decodeURIComponent` keeps it.
    this.values = (query.isWellFormed() && splitQuery(query)) || standardParams(query);
  }

  has(name: string): boolean {
    return this.values.has(name);
  }

  /** The first value of `name`, or null when it is absent (as `URLSearchParams.get`). */
  get(name: string): string | null {
    return this.values.get(name)?.[0] ?? null;
  }

  /** Every value of `name`, in the query's order. */
  getAll(name: string): readonly string[] {
    return this.values.get(name) ?? NONE;
  }
}

const NONE: readonly string[] = [];

/** The query's pieces decoded, or undefined when one would decode differently from `URLSearchParams`. */
function splitQuery(query: string): Map<string, string[]> | undefined {
  const values = new Map<string, string[]>();
  for (let start = 0; start < query.length;) {
    const amp = query.indexOf('&', start);
    const end = amp === -1 ? query.length : amp;
    if (end > start && !addPiece(values, query, start, end)) return undefined;
    start = end + 1;
  }
  return values;
}

/** Adds the piece `query[start, end)`, `name=value` or `name`; false when it does not decode. */
function addPiece(values: Map<string, string[]>, query: string, start: number, end: number): boolean {
  const eq = query.indexOf('=', start);
  const split = eq === -1 || eq > end ? end : eq;
  const name = formDecoded(query.slice(start, split));
  const value = split === end ? '' : formDecoded(query.slice(split + 1, end));
  if (name === undefined || value === undefined) return false;
  addValue(values, name, value);
  return true;
}

function addValue(values: Map<string, string[]>, name: string, value: string): void {
  const list = values.get(name);
  if (list === undefined) values.set(name, [value]);
  else list.push(value);
}

/** `+` as a space, then `%XX` decoded as UTF-8; undefined where `decodeURIComponent` refuses. */
function formDecoded(text: string): string | undefined {
  const spaced = text.includes('+') ? text.replaceAll('+', ' ') : text;
  if (!spaced.includes('%')) return spaced;
  try {
    return decodeURIComponent(spaced);
  } catch {
    return undefined;
  }
}

function standardParams(query: string): Map<string, string[]> {
  const values = new Map<string, string[]>();
  for (const [name, value] of new URLSearchParams(query)) addValue(values, name, value);
  return values;
}
