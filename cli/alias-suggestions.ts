/**
 * "did you mean alice?": for a ref that names nobody, the existing aliases
 * within two edits of it (Levenshtein distance), when the server lets the
 * caller list users. Bounded: the first SUGGESTION_SCAN users are looked at.
 */
import { USERS_PATH } from '../shared/endpoints.js';
import { parseRef } from '../shared/user.js';
import type { Context } from './context.js';
import { CliError, EXIT, StatusError, type ExitCode } from './exit-codes.js';

/** The users whose aliases are compared (ten pages of the listing's largest size). */
const SUGGESTION_SCAN = 10_000;
const PAGE = 1000;
const MAX_DISTANCE = 2;
const MAX_SUGGESTIONS = 3;

/**
 * Runs `run`; a "no such user" (exit 3) for the alias `ref` comes back with "did you mean ...?" added when some alias
 * is near.
 */
export async function suggestingAliases<T>(ctx: Context, ref: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (!(error instanceof StatusError) || error.exitCode !== EXIT.notFound || parseRef(ref).kind !== 'alias')
      throw error;
    const near = await nearAliases(ctx, ref);
    if (near.length === 0) throw error;
    throw withSuggestion(error, `did you mean ${near.join(' or ')}?`);
  }
}

function withSuggestion(error: StatusError, suggestion: string): StatusError {
  const detail = `${error.detail.replace(/\.\s*$/, '')}; ${suggestion}`;
  const better = new StatusError(error.status, detail, error.type, error.title, error.exitCode as ExitCode);
  better.ref = error.ref;
  return better;
}

/** Up to three aliases within two edits of `alias`, nearest first; none when the caller may not list. */
async function nearAliases(ctx: Context, alias: string): Promise<string[]> {
  const found: { alias: string; distance: number }[] = [];
  try {
    for (const known of await someAliases(ctx)) {
      const distance = editDistance(alias, known, MAX_DISTANCE);
      if (distance <= MAX_DISTANCE) found.push({ alias: known, distance });
    }
  } catch (error) {
    if (error instanceof CliError) return [];
    throw error;
  }
  found.sort((a, b) => a.distance - b.distance || (a.alias < b.alias ? -1 : 1));
  return found.slice(0, MAX_SUGGESTIONS).map((f) => f.alias);
}

/** The aliases of the first SUGGESTION_SCAN users. */
async function someAliases(ctx: Context): Promise<string[]> {
  const aliases: string[] = [];
  let after = 0;
  for (let read = 0; read < SUGGESTION_SCAN; read += PAGE) {
    const path = `${USERS_PATH}?limit=${PAGE}&aliases=true${after > 0 ? `&after=${after}` : ''}`;
    const response = await ctx.client.expect({ method: 'GET', path, headers: { accept: 'application/json' } }, [200]);
    const page = JSON.parse(response.text) as { items: { id: number }[]; aliases?: Record<string, string> };
    aliases.push(...Object.values(page.aliases ?? {}).filter((a) => typeof a === 'string'));
    if (page.items.length < PAGE) break;
    after = page.items[page.items.length - 1]!.id;
  }
  return aliases;
}

/** The Levenshtein distance of `a` and `b`, or `max + 1` once it is surely past `max`. */
export function editDistance(a: string, b: string, max: number): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      row.push(Math.min(previous[j]! + 1, row[j - 1]! + 1, substitution));
    }
    if (Math.min(...row) > max) return max + 1;
    previous = row;
  }
  return previous[b.length]!;
}
