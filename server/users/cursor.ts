/**
 * The opaque keyset cursor of a filtered or sorted listing (API.md "Finding
 * users"): the last item's sort values and id, and a check that ties the
 * cursor to its filter and sort, and to which of their paths compare
 * lowercased (declared case-insensitive): a change of that changes the
 * order and the matches. The check is a hash of their canonical text and
 * of the position, so a cursor given with another filter or sort, after
 * such a change, or altered, is refused. It needs no secret: a cursor grants nothing, it
 * only says where a page starts, and any instance can read it after a
 * restart.
 *
 * Layout, base64url without padding: 16 bytes of SHA-256 over the context
 * and the position, then the position as JSON, `[id, ...values]`.
 */
import { hash } from 'node:crypto';
import type { Filter } from './filter-parse.js';
import { printFilter } from './filter-print.js';
import { printSort, type SortEntry, type SortKey, type SortValue } from './sort.js';

const CHECK_BYTES = 16;
// Names the format in the hash, so no other hash of the same text can pass for a cursor's check.
const DOMAIN = 'users-server cursor 1\n';

export type CursorDecode =
  | { readonly ok: true; readonly position: SortEntry }
  | { readonly ok: false; readonly reason: 'malformed' | 'foreign'; readonly detail: string };

/** What a cursor is made for: a filter (or none), a sort (maybe no keys), and the paths that compare lowercased. */
export interface Listing {
  readonly filter: Filter | undefined;
  readonly sort: readonly SortKey[];
  readonly folded: ReadonlySet<string>;
}

/** The cursor of the page after `last`, for `listing`. */
export function encodeCursor(last: SortEntry, listing: Listing): string {
  const position = Buffer.from(JSON.stringify([last.id, ...last.values]));
  return Buffer.concat([checkOf(listing, position), position]).toString('base64url');
}

/** The position a cursor holds, when it was made for this listing; never throws. */
export function decodeCursor(text: string, listing: Listing): CursorDecode {
  const bytes = Buffer.from(text, 'base64url');
  // Buffer skips characters outside the alphabet: only the text it would write itself is a cursor.
  if (bytes.length <= CHECK_BYTES || bytes.toString('base64url') !== text) return malformed();
  const position = bytes.subarray(CHECK_BYTES);
  if (!bytes.subarray(0, CHECK_BYTES).equals(checkOf(listing, position)))
    return {
      ok: false,
      reason: 'foreign',
      detail:
        'the cursor belongs to another filter or sort, to fields declared otherwise, or was altered: start again without `after`',
    };
  const entry = entryOf(position, listing.sort.length);
  return entry === undefined ? malformed() : { ok: true, position: entry };
}

function malformed(): CursorDecode {
  return { ok: false, reason: 'malformed', detail: 'the cursor is not one this server wrote' };
}

function checkOf({ filter, sort, folded }: Listing, position: Buffer): Buffer {
  // The printed filter holds no raw newline (JSON.stringify escapes it), nor does a sort or a path: the parts cannot
  // run together.
  const lowered = foldedPathsOf(filter, sort, folded);
  const context = `${DOMAIN}${filter === undefined ? '' : printFilter(filter)}\n${printSort(sort)}\n${lowered}`;
  // One call over the text and the position together: the digest of a stream, for less than a Hash object costs.
  return hash('sha256', Buffer.concat([Buffer.from(context), position]), 'buffer').subarray(0, CHECK_BYTES);
}

/** The paths the filter compares and the sort orders by that compare lowercased, sorted, each with a newline. */
function foldedPathsOf(filter: Filter | undefined, sort: readonly SortKey[], folded: ReadonlySet<string>): string {
  if (folded.size === 0) return '';
  const paths = new Set(sort.map((k) => k.path.join('.')));
  if (filter !== undefined) comparedPaths(filter, '', paths);
  return [...paths]
    .filter((p) => folded.has(p))
    .sort()
    .map((p) => `${p}\n`)
    .join('');
}

/** Adds the paths `filter` compares to `out`, those inside `path[...]` after the path and a dot. */
function comparedPaths(filter: Filter, prefix: string, out: Set<string>): void {
  if (filter.kind === 'compare') out.add(prefix + filter.path.join('.'));
  else if (filter.kind === 'some') comparedPaths(filter.filter, `${prefix}${filter.path.join('.')}.`, out);
  else if (filter.kind === 'not') comparedPaths(filter.operand, prefix, out);
  else if (filter.kind === 'and' || filter.kind === 'or')
    for (const f of filter.operands) comparedPaths(f, prefix, out);
}

/** The entry a checked position holds, or undefined when it is not `[id, ...one value per key]`. */
function entryOf(position: Buffer, keyCount: number): SortEntry | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(position.toString('utf8'));
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed) || parsed.length !== keyCount + 1) return undefined;
  const [id, ...values] = parsed as unknown[];
  if (!Number.isSafeInteger(id) || (id as number) < 1 || !values.every(isSortValue)) return undefined;
  return { id: id as number, values };
}

function isSortValue(value: unknown): value is SortValue {
  return value === null || ['string', 'boolean', 'number'].includes(typeof value);
}
