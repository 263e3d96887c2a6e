/**
 * The canonical text of a parsed filter: operators in lower case, one space
 * between tokens, parentheses only where the tree needs them, values as
 * JSON.stringify writes them. Filters that differ only in spelling
 * (`EQ`, `1.0`, extra spaces or parentheses) print the same, and
 * `parseFilter(printFilter(f))` gives `f` back; a cursor's check is a hash
 * of this text.
 */
import type { Filter } from './filter-parse.js';

export function printFilter(filter: Filter): string {
  switch (filter.kind) {
    case 'or':
      return filter.operands.map((f) => grouped(f, f.kind === 'or')).join(' or ');
    case 'and':
      return filter.operands.map((f) => grouped(f, f.kind === 'or' || f.kind === 'and')).join(' and ');
    case 'not':
      return `not (${printFilter(filter.operand)})`;
    case 'compare':
      return `${filter.path.join('.')} ${filter.op} ${JSON.stringify(filter.value)}`;
    case 'present':
      return `${filter.path.join('.')} pr`;
    case 'some':
      return `${filter.path.join('.')}[${printFilter(filter.filter)}]`;
  }
}

function grouped(filter: Filter, parenthesized: boolean): string {
  return parenthesized ? `(${printFilter(filter)})` : printFilter(filter);
}
