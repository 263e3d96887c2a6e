/**
 * What usersctl sends and shows for a find (docs/cli.md "list, find and
 * export"): the query of `--filter`, `--sort` and `--count`, the filter of
 * `find PATH VALUE`, and the paths a filter and a sort name, which the
 * table shows as columns. The server parses the filter and refuses what is
 * wrong; usersctl reads a filter only as far as its columns need.
 */
import { CliUsageError } from './exit-codes.js';
import { USER_PATH } from '../shared/user.js';

export interface FindOptions {
  filter?: string | undefined;
  sort?: string | undefined;
}

/** `&filter=...&sort=...` for the options given, or ''. */
export function findParams(options: FindOptions): string {
  const params = new URLSearchParams();
  if (options.filter !== undefined) params.set('filter', options.filter);
  if (options.sort !== undefined) params.set('sort', options.sort);
  const text = params.toString();
  return text === '' ? '' : `&${text}`;
}

/**
 * The filter `PATH eq VALUE` of `find`: VALUE as a JSON string, or with
 * `jsonValue` the JSON literal it is (a string, number, true, false or null).
 */
export function equalsFilter(path: string, value: string, jsonValue: boolean): string {
  if (!USER_PATH.test(path))
    throw new CliUsageError(
      `${JSON.stringify(path)} is not a path: names joined by dots, each a letter or _, then letters, digits, _ or -`,
    );
  return `${path} eq ${jsonValue ? jsonLiteral(value) : JSON.stringify(value)}`;
}

function jsonLiteral(text: string): string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const literal = value === null || typeof value === 'string' || typeof value === 'boolean' || Number.isFinite(value);
  if (!literal)
    throw new CliUsageError(`--json-value: ${JSON.stringify(text)} is not a JSON string, number, true, false or null`);
  return JSON.stringify(value);
}

const OPERATOR = /^(?:eq|ne|co|sw|ew|gt|ge|lt|le|pr)$/i;
// A token of a filter: a JSON string, a word (a path, an operator, a keyword, a literal), a number, or one other
// character.
const TOKEN = /"(?:[^"\\]|\\.)*"?|[A-Za-z_][A-Za-z0-9_.-]*|[-0-9][0-9A-Za-z_.+-]*|\S/gy;

/**
 * The paths a filter and a sort name, in order, each once: the columns of
 * the table. A condition inside `path[...]` is about the elements of
 * `path`, which is the column.
 */
export function namedPaths(options: FindOptions): string[] {
  const paths: string[] = [];
  const tokens = options.filter === undefined ? [] : tokensOf(options.filter);
  let depth = 0;
  for (const [i, token] of tokens.entries()) {
    if (token === '[') depth++;
    else if (token === ']') depth--;
    const next = tokens[i + 1];
    const isPath = USER_PATH.test(token) && next !== undefined && (next === '[' || OPERATOR.test(next));
    if (isPath && depth === 0 && !/^(?:and|or|not)$/i.test(token)) paths.push(token);
  }
  for (const key of options.sort?.split(',') ?? []) paths.push(key.replace(/^-/, ''));
  return [...new Set(paths)];
}

function tokensOf(filter: string): string[] {
  const tokens: string[] = [];
  TOKEN.lastIndex = 0;
  for (;;) {
    while (filter[TOKEN.lastIndex] === ' ') TOKEN.lastIndex++;
    const match = TOKEN.exec(filter);
    if (match === null) return tokens;
    tokens.push(match[0]);
  }
}

/**
 * The value at a dotted path of a user, through objects and into every element of an array met; undefined when none.
 */
export function memberAt(user: unknown, path: string): unknown {
  let values: unknown[] = [user];
  for (const name of path.split('.')) {
    const next: unknown[] = [];
    for (const value of values.flatMap((v) => (Array.isArray(v) ? v : [v])))
      if (typeof value === 'object' && value !== null && Object.hasOwn(value, name))
        next.push((value as Record<string, unknown>)[name]);
    values = next;
  }
  return values.length <= 1 ? values[0] : values;
}
