/**
 * What the two answers of `GET /users` share, the listing by id and the
 * find (routes/find-users.ts): the page size, the parameters that are one
 * integer or the flag `true`, and the map of aliases of `aliases=true`.
 */
import { problems } from '../../shared/problems.js';
import { HttpError } from '../errors.js';
import type { QueryParams } from './query-params.js';

export const DEFAULT_PAGE = 100;
export const MAX_PAGE = 1000;

/** A flag (`aliases`, `count`): `true` (the only value), or absent. */
export function flagParam(params: QueryParams, name: string): boolean {
  const values = params.getAll(name);
  if (values.length === 0) return false;
  if (values.length === 1 && values[0] === 'true') return true;
  throw new HttpError(problems.invalidQuery, `${name} must be true, or absent.`, {}, { parameter: name });
}

/** `{"<id>":"<alias>",...}` for the page's users that have an alias. */
export function aliasMap(page: { readonly aliases: readonly (readonly [number, string])[] }): string {
  return `{${page.aliases.map(([id, alias]) => `"${id}":${JSON.stringify(alias)}`).join(',')}}`;
}

export function integerParam(params: QueryParams, name: string, fallback: number, min: number, max: number): number {
  const values = params.getAll(name);
  if (values.length === 0) return fallback;
  const text = values[0]!;
  const n = values.length === 1 && /^\d{1,16}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new HttpError(
      problems.invalidQuery,
      `${name} must be one integer from ${min} to ${max}.`,
      {},
      { parameter: name },
    );
  }
  return n;
}
