/**
 * A filter over a user's stored JSON text: before a user is parsed, the
 * text is asked for the pieces any match must contain (`"email":` for a
 * condition on `email`, `"bob@example.org"` for `email eq "bob@example.org"`),
 * so that a scan parses only the users that may match; `matches` decides
 * for those. A piece is only ever required where every match holds it, so
 * this never turns a match away.
 *
 * The text is the representation as JSON.stringify wrote it (users/rules.ts
 * `represent`): no spaces, and a string's characters escaped one by one,
 * so the escaped form of a part of a string is a part of its escaped form.
 */
import type { Filter } from './filter-parse.js';
import { matches } from './filter-match.js';

/** True when the user whose representation is `json` satisfies the filter, as `matches` decides. */
type TextMatcher = (json: string) => boolean;

/** The test of `filter` over stored JSON text, `caseInsensitivePaths` as for `matches`. */
export function textMatcher(filter: Filter, caseInsensitivePaths: ReadonlySet<string>): TextMatcher {
  const mayMatch = textNeedles(filter, caseInsensitivePaths);
  return (json) => mayMatch(json) && matches(filter, JSON.parse(json), caseInsensitivePaths);
}

/** False for a text that cannot satisfy `filter` (it lacks a piece every match holds); true says nothing. */
export function textNeedles(filter: Filter, caseInsensitivePaths: ReadonlySet<string>): TextMatcher {
  const needles = [...new Set(needlesOf(filter, '', caseInsensitivePaths))];
  return (json) => needles.every((needle) => json.includes(needle));
}

/** The pieces of text every user that satisfies `filter` (at `prefix`, as `matches` writes it) holds. */
function needlesOf(filter: Filter, prefix: string, folded: ReadonlySet<string>): string[] {
  switch (filter.kind) {
    case 'and':
      return filter.operands.flatMap((f) => needlesOf(f, prefix, folded));
    // Either side may hold: neither side's pieces are required. A negation requires nothing either.
    case 'or':
    case 'not':
      return [];
    case 'present':
      return [memberNeedle(filter.path)];
    case 'some':
      return [memberNeedle(filter.path), ...needlesOf(filter.filter, `${prefix}${filter.path.join('.')}.`, folded)];
    case 'compare':
      return compareNeedles(filter, folded.has(prefix + filter.path.join('.')));
  }
}

/** `"name":`, the key of the path's last member: a member that holds anything shows it. */
function memberNeedle(path: readonly string[]): string {
  return `"${path[path.length - 1]!}":`;
}

function compareNeedles(filter: Extract<Filter, { kind: 'compare' }>, lowercased: boolean): string[] {
  const { op, value } = filter;
  // `eq null` matches a missing member; `ne` matches what lacks the value.
  if (op === 'ne' || value === null) return [];
  const member = memberNeedle(filter.path);
  // A lowercased comparison matches other cases, and a string of a lone surrogate is escaped apart from its pair.
  if (typeof value !== 'string' || lowercased || !value.isWellFormed()) return [member];
  const quoted = JSON.stringify(value);
  const escaped = quoted.slice(1, -1);
  switch (op) {
    case 'eq':
      return [member, quoted];
    case 'co':
      return [member, escaped];
    case 'sw':
      return [member, `"${escaped}`];
    case 'ew':
      return [member, `${escaped}"`];
    default:
      return [member];
  }
}
