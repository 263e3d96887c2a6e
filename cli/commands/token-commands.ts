/** tokens create, list and revoke: API tokens for scripts and scrapers (an admin's session or token). */
import { MAX_TOKEN_LIFETIME, parseLifetime, TOKEN_NAME, TOKENS_PATH } from '../../shared/endpoints.js';
import type { Context } from '../context.js';
import type { View } from '../output-format.js';
import { CliError, EXIT, UnexpectedAnswerError, CliUsageError } from '../exit-codes.js';
import { jsonObject } from '../answers.js';
import { eachRef } from './user-commands.js';

const JSON_HEADERS = { accept: 'application/json', 'content-type': 'application/json' };
const TOKEN_ID = /^[0-9a-f]{16}$/;

/** A token as GET /tokens lists it. */
interface TokenInfo {
  id: string;
  name: string;
  role: string;
  /** What it may do now; null once its account was removed. */
  actsAs: string | null;
  createdBy: string;
  createdWith: string | null;
  createdAt: string;
  expiresAt: string | null;
  expired: boolean;
}

export interface CreateTokenOptions {
  role: 'admin' | 'reader';
  expires?: string;
}

/** POST /tokens: prints the token alone on stdout (--json: the server JSON); it is never shown again. */
export async function create(ctx: Context, name: string, options: CreateTokenOptions): Promise<void> {
  if (!TOKEN_NAME.test(name))
    throw new CliUsageError(`${JSON.stringify(name)} is not a token name: 1 to 64 of A-Z a-z 0-9 . _ -`);
  const body: Record<string, unknown> = { name, role: options.role };
  if (options.expires !== undefined && options.expires !== 'never') {
    const seconds = parseLifetime(options.expires);
    if (seconds === undefined || seconds > MAX_TOKEN_LIFETIME) {
      throw new CliUsageError(
        `--expires: give a lifetime such as 90d, 12h, 30m, 2w or 3600s (at most ten years), or never; not ${JSON.stringify(options.expires)}`,
      );
    }
    body.expiresIn = seconds;
  }
  const response = await ctx.client.expect(
    { method: 'POST', path: TOKENS_PATH, headers: JSON_HEADERS, body: JSON.stringify(body) },
    [201],
  );
  const made = jsonObject(response.text, 'a new API token') as unknown as TokenInfo & { token: string };
  if (typeof made.token !== 'string') throw new UnexpectedAnswerError('a new API token without "token"');
  await ctx.out.write(ctx.options.json ? `${response.text}\n` : `${made.token}\n`);
  const expiry = made.expiresAt === null ? 'never expires' : `expires ${made.expiresAt}`;
  ctx.info(
    `made API token "${made.name}" (${made.role}, ${expiry}, id ${made.id}); it is shown only now: keep it, e.g. export USERSCTL_TOKEN=...`,
  );
}

const TOKEN_VIEW: View<TokenInfo> = {
  json: (token) => JSON.stringify(token),
  columns: [
    { header: 'ID', cell: (t) => t.id },
    { header: 'NAME', cell: (t) => t.name },
    { header: 'ROLE', cell: roleCell },
    { header: 'ACCOUNT', cell: (t) => (t.actsAs === null ? `${t.createdBy} (removed: refused)` : t.createdBy) },
    { header: 'CREATED', cell: (t) => t.createdAt },
    {
      header: 'EXPIRES',
      cell: (t) => (t.expiresAt === null ? 'never' : `${t.expiresAt}${t.expired ? ' (expired)' : ''}`),
    },
  ],
  fields: (token) => token as unknown as Record<string, unknown>,
  shown: ['id', 'name', 'role', 'actsAs', 'createdBy', 'createdAt', 'expiresAt', 'expired'],
};

/** The role, and what the token acts as when its account's role lowers it (servers before 0.2 send no actsAs). */
function roleCell(t: TokenInfo): string {
  return t.actsAs === undefined || t.actsAs === null || t.actsAs === t.role
    ? t.role
    : `${t.role} (acts as ${t.actsAs})`;
}

/**
 * GET /tokens: a table of ID NAME ROLE ACCOUNT CREATED EXPIRES on a terminal, else (and with --json) one JSON object a
 * line; `-o` chooses.
 */
export async function list(ctx: Context, output?: string): Promise<void> {
  const printed = ctx.listing(ctx.outputFormat(output), TOKEN_VIEW);
  await printed.add(await fetchTokens(ctx));
  await printed.end();
}

/**
 * DELETE /tokens/{id} for each ref: an id, or a name looked up in GET
 * /tokens; `-` reads refs from stdin. The listing, read once, also tells
 * which tokens were made with each one: the server revokes them with it.
 */
export async function revoke(ctx: Context, refs: readonly string[]): Promise<number> {
  let listed: TokenInfo[] | undefined;
  return eachRef(ctx, refs, async (ref) => {
    listed ??= await fetchTokens(ctx);
    let id = ref;
    let label = ref;
    if (!TOKEN_ID.test(ref)) {
      const token = listed.find((t) => t.name === ref);
      if (token === undefined)
        throw new CliError(
          `no API token is named ${JSON.stringify(ref)} (usersctl tokens list shows them)`,
          EXIT.notFound,
        );
      id = token.id;
      label = `"${token.name}" (${token.id})`;
    }
    await ctx.client.expect({ method: 'DELETE', path: `${TOKENS_PATH}/${id}` }, [204]);
    const made = madeWith(listed, id);
    listed = listed.filter((t) => t.id !== id && !made.includes(t));
    ctx.info(
      `revoked API token ${label}${made.length === 0 ? '' : `, and the ${made.length === 1 ? 'token' : `${made.length} tokens`} made with it (${made.map((t) => t.name).join(', ')})`}`,
    );
  });
}

/** The tokens made with `id`, directly or through others. */
function madeWith(tokens: readonly TokenInfo[], id: string): TokenInfo[] {
  const found: TokenInfo[] = [];
  const parents = [id];
  for (let i = 0; i < parents.length; i++) {
    for (const t of tokens) {
      if (t.createdWith !== parents[i]) continue;
      found.push(t);
      parents.push(t.id);
    }
  }
  return found;
}

async function fetchTokens(ctx: Context): Promise<TokenInfo[]> {
  const response = await ctx.client.expect(
    { method: 'GET', path: TOKENS_PATH, headers: { accept: 'application/json' } },
    [200],
  );
  const { items } = jsonObject(response.text, 'a list of API tokens');
  if (!Array.isArray(items)) throw new UnexpectedAnswerError('a list of API tokens without "items"');
  return items as TokenInfo[];
}
