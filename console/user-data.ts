/** A user as the API gives it, and the values the table and the form show of it. */

export interface User {
  readonly id: number;
  readonly name?: unknown;
  readonly [member: string]: unknown;
}

/** The value at a dotted path (`address.city`); where the path meets an array, the values of its elements. */
export function valueAt(value: unknown, path: string): unknown {
  let values: unknown[] = [value];
  for (const name of path.split('.')) {
    const inner: unknown[] = [];
    for (const v of values.flatMap((x) => (Array.isArray(x) ? x : [x]))) {
      if (typeof v === 'object' && v !== null && Object.hasOwn(v, name))
        inner.push((v as Record<string, unknown>)[name]);
    }
    values = inner;
  }
  if (values.length === 0) return undefined;
  return values.length === 1 ? values[0] : values;
}

/**
 * A value as text for a cell: strings as they are, arrays joined, anything else as JSON; nothing for null and missing.
 */
export function displayValue(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value.map(displayValue).join(', ');
  return JSON.stringify(value);
}
