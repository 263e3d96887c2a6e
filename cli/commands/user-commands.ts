/** get, put, delete, list, find, export, reserve, create, new and mv. */
import { jsonErrorPlace, jsonErrorReason } from '../../shared/json-position.js';
import { randomUUID } from 'node:crypto';
import { METRICS_PATH, NEW_USER_PATH, RESERVATIONS_PATH, USERS_PATH, userPath } from '../../shared/endpoints.js';
import { isId, parseRef } from '../../shared/user.js';
import type { Context } from '../context.js';
import { CliError, CliUsageError, EXIT, NetworkError, StatusError, UnexpectedAnswerError } from '../exit-codes.js';
import { answerUser, jsonObject, oneLine, single, type Response } from '../answers.js';
import { inputTooLong, readLines } from '../streams.js';
import { endRecord, EXPORT_HEADER } from '../export-format.js';
import { equalsFilter, findParams, memberAt, namedPaths, type FindOptions } from '../find-query.js';
import type { View } from '../output-format.js';
import { startProgress } from '../progress.js';
import { suggestingAliases } from '../alias-suggestions.js';

const JSON_TYPE = 'application/json';
const ACCEPT = { accept: JSON_TYPE };
export const DEFAULT_PAGE_SIZE = 100;
export const MAX_PAGE_SIZE = 1000;

/** `/users/{ref}` for a reference the server could accept; anything else is a usage error. */
export function refPath(ref: string): string {
  const parsed = parseRef(ref);
  if (parsed.kind === 'invalid')
    throw new CliUsageError(`${JSON.stringify(ref)} is not a user id or alias: ${parsed.reason}`);
  return `${USERS_PATH}/${ref}`;
}

/** The refs of the command line, with `-` replaced by the lines of stdin. */
async function* expandRefs(ctx: Context, refs: readonly string[]): AsyncGenerator<string> {
  let stdinUsed = false;
  for (const ref of refs) {
    if (ref !== '-') {
      yield ref;
      continue;
    }
    if (stdinUsed) continue;
    stdinUsed = true;
    for await (const line of readLines(ctx.io.stdin as AsyncIterable<Buffer | string>)) {
      if (line.tooLong !== undefined) throw inputTooLong(`line ${line.number} of stdin`);
      const text = line.bytes.toString('utf8').trim();
      if (text !== '') yield text;
    }
  }
}

export interface GetOptions {
  etag?: boolean;
  output?: string;
}

/** A user as `get` and `list` print it: the server's JSON, and the alias where known. */
interface Listed {
  user: Record<string, unknown>;
  text: string;
  alias: string | null | undefined;
}

const USER_VIEW: View<Listed> = {
  json: (listed) => listed.text,
  columns: [
    { header: 'ID', cell: (listed) => listed.user.id },
    { header: 'ALIAS', cell: (listed) => listed.alias },
    { header: 'NAME', cell: (listed) => listed.user.name },
  ],
  fields: (listed) => listed.user,
  shown: ['id', 'name'],
};

/** USER_VIEW with a column more for each path a find filters or sorts on (but `id` and `name`, which have theirs). */
function userView(paths: readonly string[]): View<Listed> {
  const more = paths.filter((path) => path !== 'id' && path !== 'name');
  if (more.length === 0) return USER_VIEW;
  return {
    ...USER_VIEW,
    columns: [
      ...USER_VIEW.columns,
      ...more.map((path) => ({ header: path.toUpperCase(), cell: (listed: Listed) => memberAt(listed.user, path) })),
    ],
    shown: [...USER_VIEW.shown, ...more],
  };
}

/** The alias of the user `id` (a table's ALIAS column for a user got by id): one listing page of that user. */
async function aliasOf(ctx: Context, id: unknown): Promise<string | null | undefined> {
  if (!isId(id)) return undefined;
  const response = await ctx.client.expect(
    { method: 'GET', path: `${USERS_PATH}?after=${id - 1}&limit=1&aliases=true`, headers: ACCEPT },
    [200],
  );
  const alias = ((parsePage(response.text).aliases ?? {}) as Record<string, unknown>)[String(id)];
  return typeof alias === 'string' ? alias : null;
}

/**
 * Runs `one` for each ref (`-`: the lines of stdin). With several refs a
 * failure is reported and the rest still run; the exit code is the first
 * failure's. A network failure stops at once: the next ref would fail too.
 */
export async function eachRef(
  ctx: Context,
  refs: readonly string[],
  one: (ref: string) => Promise<void>,
): Promise<number> {
  const several = refs.length > 1 || refs.includes('-');
  let exitCode = 0;
  for await (const ref of expandRefs(ctx, refs)) {
    try {
      if (ctx.interruption.reason !== undefined) break;
      await one(ref);
    } catch (error) {
      if (error instanceof CliError) error.ref ??= ref;
      if (!several || !(error instanceof CliError) || error instanceof NetworkError) throw error;
      ctx.failRef(ref, error);
      if (exitCode === 0) exitCode = error.exitCode;
    }
  }
  return exitCode;
}

/** Prints each user (as the server sent it, or a table's row), or with --etag its ETag. */
export async function get(ctx: Context, refs: readonly string[], options: GetOptions): Promise<number> {
  const format = ctx.outputFormat(options.output);
  const table = format === 'table' || format === 'wide';
  const printed = ctx.listing(format, USER_VIEW, { single: refs.length === 1 && refs[0] !== '-' });
  const code = await eachRef(ctx, refs, async (ref) => {
    const response = await suggestingAliases(ctx, ref, () =>
      ctx.client.expect({ method: 'GET', path: refPath(ref), headers: ACCEPT }, [200]),
    );
    if (options.etag === true) return void (await ctx.out.write((single(response.headers.etag) ?? '') + '\n'));
    const user = answerUser(response);
    const alias = !table ? undefined : parseRef(ref).kind === 'alias' ? ref : await aliasOf(ctx, user.id);
    await printed.add([{ user, text: response.text, alias }]);
  });
  if (options.etag !== true) await printed.end();
  return code;
}

export interface BodyOptions {
  name?: string;
  file?: string;
}

/** The JSON body of put/create: `-f FILE|-` as given, `--name` alone, or the file with its name replaced. */
async function userBody(ctx: Context, options: BodyOptions): Promise<string> {
  if (options.file === undefined) {
    if (options.name === undefined) throw new CliUsageError('give the user with --name NAME or -f FILE (- for stdin)');
    return JSON.stringify({ name: options.name });
  }
  const text = await ctx.readInput(options.file);
  const where = options.file === '-' ? 'stdin' : options.file;
  let user: unknown;
  // Checked here, not by the server: a bad local file is a usage error that names the file and the place.
  try {
    user = JSON.parse(text);
  } catch (error) {
    throw new CliUsageError(
      `${where} is not JSON at ${jsonErrorPlace(text, error)} (${jsonErrorReason(error)}); fix it and run the command again`,
    );
  }
  if (typeof user !== 'object' || user === null || Array.isArray(user))
    throw new CliUsageError(`${where}: the user must be a JSON object`);
  if (options.name === undefined) return text;
  return JSON.stringify({ ...(user as Record<string, unknown>), name: options.name });
}

export interface PutOptions extends BodyOptions {
  ifMatch?: string;
  createOnly?: boolean;
  /** false with `--no-create`: only replace (If-Match: *). */
  create?: boolean;
}

/** Runs `run`; a failure it throws is marked as about `ref` (for --json). */
async function aboutRef<T>(ref: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof CliError) error.ref ??= ref;
    throw error;
  }
}

/** PUT /users/{ref}: replace, or create through an alias or a reserved id. */
export function put(ctx: Context, ref: string, options: PutOptions): Promise<void> {
  return aboutRef(ref, () => putUser(ctx, ref, options));
}

async function putUser(ctx: Context, ref: string, options: PutOptions): Promise<void> {
  const noCreate = options.create === false;
  if (options.createOnly === true && (options.ifMatch !== undefined || noCreate))
    throw new CliUsageError(`${noCreate ? '--no-create' : '--if-match'} and --create-only contradict each other`);
  const path = refPath(ref);
  const body = await userBody(ctx, options);
  const headers: Record<string, string> = { ...ACCEPT, 'content-type': JSON_TYPE };
  const ifMatch = options.ifMatch ?? (noCreate ? '*' : undefined);
  if (ifMatch !== undefined) headers['if-match'] = ifMatch;
  if (options.createOnly === true) headers['if-none-match'] = '*';
  const send = () => ctx.client.expect({ method: 'PUT', path, headers, body }, [200, 201]);
  const response =
    noCreate && options.ifMatch === undefined
      ? await suggestingAliases(ctx, ref, () => replaceOnly(send))
      : await send();
  await writeUser(ctx, response);
  if (ctx.io.stderr.isTTY === true) ctx.info(putSummary(ref, response));
}

/** `send` (a PUT with If-Match: *), whose 412 says that nobody has the ref: told as such, exit 3. */
async function replaceOnly(send: () => Promise<Response>): Promise<Response> {
  try {
    return await send();
  } catch (error) {
    if (!(error instanceof StatusError) || error.status !== 412) throw error;
    throw new StatusError(412, 'No such user (put --no-create creates none).', error.type, error.title, EXIT.notFound);
  }
}

/** What a PUT did, for a person at a terminal: created or replaced, and the id. */
function putSummary(ref: string, response: Response): string {
  const id = response.text === '' ? undefined : answerUser(response).id;
  const what = response.status === 201 ? 'created' : 'replaced';
  const named = id === undefined || String(id) === ref ? `user ${ref}` : `user ${id} (${ref})`;
  return `${what} ${named}`;
}

export interface DeleteOptions {
  ifMatch?: string;
}

/**
 * DELETE each ref, printing each user as it was when deleted (the server's
 * answer to Prefer: return=representation), so nothing is deleted without a
 * copy; --if-match names one user's ETag, so it takes one ref.
 */
export function remove(ctx: Context, refs: readonly string[], options: DeleteOptions): Promise<number> {
  if (options.ifMatch !== undefined && (refs.length > 1 || refs.includes('-')))
    throw new CliUsageError('--if-match is the ETag of one user: give one ref with it');
  const headers: Record<string, string> = { ...ACCEPT, prefer: 'return=representation' };
  if (options.ifMatch !== undefined) headers['if-match'] = options.ifMatch;
  return eachRef(ctx, refs, async (ref) => {
    const response = await suggestingAliases(ctx, ref, () =>
      ctx.client.expect({ method: 'DELETE', path: refPath(ref), headers }, [200, 204]),
    );
    // 204: a server that does not send it back.
    if (response.status === 200) await writeUser(ctx, response);
  });
}

export interface ListOptions extends FindOptions {
  /** Users per page. */
  limit: number;
  output?: string | undefined;
  /** `--count`: print how many users match, not the users. */
  count?: boolean | undefined;
}

/** Every user (or with a filter every match, in the order of a sort), following `next` to the end, as NDJSON. */
export async function list(ctx: Context, options: ListOptions): Promise<void> {
  if (options.count === true) return printCount(ctx, options);
  const format = ctx.outputFormat(options.output);
  const printed = ctx.listing(format, userView(namedPaths(options)));
  const aliases = format === 'table' || format === 'wide' ? '&aliases=true' : '';
  let path: string | null = `${USERS_PATH}?limit=${options.limit}${aliases}${findParams(options)}`;
  const read = new Set<string>();
  // The tables print nothing before the end: they align on every row.
  const streamed = format === 'ndjson' || format === 'json';
  let printedCount = 0;
  try {
    while (path !== null && ctx.interruption.reason === undefined) {
      const response = await getPage(ctx, path, options);
      const page = parsePage(response.text);
      const byId = (page.aliases ?? {}) as Record<string, unknown>;
      // The server writes each user with JSON.stringify, so re-serializing a
      // parsed item gives back its exact bytes.
      await printed.add(
        page.items.map((item) => {
          const user = item as Record<string, unknown>;
          const alias = byId[String(user.id)];
          return { user, text: JSON.stringify(item), alias: typeof alias === 'string' ? alias : null };
        }),
      );
      if (streamed) printedCount += page.items.length;
      path = nextPath(page, read);
    }
  } catch (error) {
    throw cutShort(error, 'list', printedCount, 'printed');
  }
  await printed.end();
}

/** `list --count`: the `total` of one page with `count=true`. */
async function printCount(ctx: Context, options: FindOptions): Promise<void> {
  const response = await getPage(ctx, `${USERS_PATH}?limit=1&count=true${findParams(options)}`, options);
  const total = jsonObject(response.text, 'a page of users').total;
  if (!Number.isSafeInteger(total) || (total as number) < 0)
    throw new UnexpectedAnswerError('a counted page of users without a "total"');
  await ctx.out.write(`${total}\n`);
}

export interface FindCommandOptions {
  jsonValue?: boolean;
  limit: number;
  output?: string;
}

/** `find PATH VALUE`: `list` of the users whose PATH equals VALUE. */
export function find(ctx: Context, path: string, value: string, options: FindCommandOptions): Promise<void> {
  return list(ctx, { ...options, filter: equalsFilter(path, value, options.jsonValue === true) });
}

/**
 * A page of users. With a filter or a sort, a 400 refuses what the user
 * typed (the server's detail names the column): exit 2, as a bad flag is.
 */
async function getPage(ctx: Context, path: string, typed: FindOptions): Promise<Response> {
  try {
    return await ctx.client.expect({ method: 'GET', path, headers: ACCEPT }, [200]);
  } catch (error) {
    const refused = error instanceof StatusError && error.status === 400;
    if (!refused || (typed.filter === undefined && typed.sort === undefined)) throw error;
    throw new StatusError(400, error.message, error.type, error.title, EXIT.usage);
  }
}

/**
 * `export`: the header line, then one record a user in id order:
 * `{"id":1,"alias":"alice","user":{...}}`, the representation as stored;
 * then the end record, with the count.
 */
export async function exportUsers(ctx: Context, options: FindOptions = {}): Promise<void> {
  await ctx.out.write(EXPORT_HEADER + '\n');
  let written = 0;
  // How many match a filter is not known before the end: the progress then shows no fraction.
  const total = ctx.io.stderr.isTTY === true && options.filter === undefined ? await usersStored(ctx) : undefined;
  const progress = startProgress(ctx, 'users', () => ({
    done: written,
    ...(total !== undefined && total > 0 && { fraction: written / total }),
  }));
  try {
    await exportPages(ctx, options, (count) => (written += count));
    // Only a run that read the last page ends the file: one stopped early has no end, and import says it was cut short.
    if (ctx.interruption.reason === undefined) await ctx.out.write(endRecord(written) + '\n');
  } catch (error) {
    throw cutShort(error, 'export', written, 'written');
  } finally {
    progress?.stop();
  }
  if (progress !== undefined && ctx.interruption.reason === undefined) ctx.info(`exported ${written} users`);
}

/**
 * The users the server holds (its /metrics gauge), for the progress of `export`; undefined when /metrics does not say.
 */
async function usersStored(ctx: Context): Promise<number | undefined> {
  try {
    const response = await ctx.client.send({ method: 'GET', path: METRICS_PATH });
    const match = response.status === 200 ? /^users_server_users (\d+)$/m.exec(response.text) : null;
    return match === null ? undefined : Number(match[1]);
  } catch {
    return undefined;
  }
}

/** Writes every page of export records (of the users a filter matches); `wrote` hears the count of each page. */
async function exportPages(ctx: Context, options: FindOptions, wrote: (count: number) => void): Promise<void> {
  let path: string | null = `${USERS_PATH}?limit=${MAX_PAGE_SIZE}&aliases=true${findParams(options)}`;
  const read = new Set<string>();
  while (path !== null && ctx.interruption.reason === undefined) {
    const response = await getPage(ctx, path, options);
    const page = parsePage(response.text);
    const aliases = (page.aliases ?? {}) as Record<string, unknown>;
    let lines = '';
    for (const item of page.items) {
      const id = (item as { id?: unknown }).id;
      if (!isId(id)) throw new UnexpectedAnswerError('a listed user without an id');
      const alias = aliases[String(id)];
      lines += `{"id":${id},"alias":${typeof alias === 'string' ? JSON.stringify(alias) : 'null'},"user":${JSON.stringify(item)}}\n`;
    }
    await ctx.out.write(lines);
    wrote(page.items.length);
    path = nextPath(page, read);
  }
}

/**
 * A failure met after part of a listing was out (`count` users): its
 * sentence also says that the output is incomplete. The error keeps its
 * class, exit code and fields (--json's record). Only for a refusal or a
 * network failure, which a later run may not meet: an answer that is not
 * users-server's says so already, as a stop (Ctrl-C, a closed output) does.
 */
function cutShort(error: unknown, command: string, count: number, done: string): unknown {
  if (count === 0 || !(error instanceof StatusError || error instanceof NetworkError)) return error;
  error.message = `${error.message.replace(/\.$/, '')}; ${command} stopped after ${count} users: what was ${done} is incomplete, run it again`;
  return error;
}

/**
 * The path of the page after `page`: a path, and one not read before (a
 * server whose `next` links back would be read without end); null at the end.
 */
function nextPath(page: { next: string | null }, read: Set<string>): string | null {
  const next = page.next;
  if (next === null) return null;
  if (!next.startsWith('/')) throw new UnexpectedAnswerError(`a "next" link that is not a path: ${oneLine(next)}`);
  if (read.has(next)) throw new UnexpectedAnswerError(`a "next" link back to a page already read (${oneLine(next)})`);
  read.add(next);
  return next;
}

function parsePage(text: string): { items: unknown[]; aliases?: unknown; next: string | null } {
  const page = jsonObject(text, 'a page of users');
  if (!Array.isArray(page.items) || (page.next !== null && typeof page.next !== 'string')) {
    throw new UnexpectedAnswerError('a page of users without "items" and "next"');
  }
  return { items: page.items, aliases: page.aliases, next: page.next };
}

/** POST /reservations, safe to retry: the same Idempotency-Key on every attempt. */
async function reserveId(ctx: Context): Promise<{ response: Response; id: number; expiresAt: string }> {
  const response = await ctx.client.expect(
    { method: 'POST', path: RESERVATIONS_PATH, headers: { ...ACCEPT, 'idempotency-key': randomUUID() } },
    [201],
  );
  const body = jsonObject(response.text, 'a reservation');
  if (!isId(body.id) || typeof body.expiresAt !== 'string')
    throw new UnexpectedAnswerError('a reservation without "id" and "expiresAt"');
  return { response, id: body.id, expiresAt: body.expiresAt };
}

/** Prints `<id>\t<expiresAt>`, or with --json the server's JSON. */
export async function reserve(ctx: Context): Promise<void> {
  const { response, id, expiresAt } = await reserveId(ctx);
  await ctx.out.write(ctx.options.json ? `${response.text}\n` : `${id}\t${expiresAt}\n`);
}

export interface CreateOptions extends BodyOptions {
  mode: 'uuid' | 'reserve';
}

/**
 * A new user, safe to retry either way: `uuid` PUTs under a fresh UUID alias
 * (a repeated PUT replaces with the same body); `reserve` reserves an id
 * (Idempotency-Key) and PUTs under it.
 */
export async function create(ctx: Context, options: CreateOptions): Promise<void> {
  const body = await userBody(ctx, options);
  const path = options.mode === 'reserve' ? userPath((await reserveId(ctx)).id) : `${USERS_PATH}/${randomUUID()}`;
  const headers = { ...ACCEPT, 'content-type': JSON_TYPE };
  const response = await ctx.client.expect({ method: 'PUT', path, headers, body }, [200, 201]);
  await writeUser(ctx, response);
}

/** POST /users/new with an Idempotency-Key, the same on every retry. */
export async function createNew(ctx: Context, options: BodyOptions): Promise<void> {
  const body = await userBody(ctx, options);
  const headers = { ...ACCEPT, 'content-type': JSON_TYPE, 'idempotency-key': randomUUID() };
  const response = await ctx.client.expect({ method: 'POST', path: NEW_USER_PATH, headers, body }, [201]);
  await writeUser(ctx, response);
}

/**
 * Moves a user to a new id: GET for the representation and its ETag, then
 * PUT it back with the new `id` under If-Match, so a change in between is
 * not overwritten (412). Needs a server started with --allow-id-change.
 */
export function move(ctx: Context, ref: string, newId: string): Promise<void> {
  return aboutRef(ref, () => moveUser(ctx, ref, newId));
}

async function moveUser(ctx: Context, ref: string, newId: string): Promise<void> {
  if (!/^[1-9]\d*$/.test(newId) || !isId(Number(newId)))
    throw new CliUsageError(`the new id must be a positive integer, not ${JSON.stringify(newId)}`);
  const current = await ctx.client.expect({ method: 'GET', path: refPath(ref), headers: ACCEPT }, [200]);
  const user = answerUser(current);
  const headers: Record<string, string> = { ...ACCEPT, 'content-type': JSON_TYPE };
  const etag = single(current.headers.etag);
  if (etag !== undefined) headers['if-match'] = etag;
  const body = JSON.stringify({ ...user, id: Number(newId) });
  const response = await ctx.client.expect({ method: 'PUT', path: userPath(user.id), headers, body }, [200]);
  await writeUser(ctx, response);
}

/** A user as the server answered it, checked to be one; a 204 (no body) prints nothing. */
async function writeUser(ctx: Context, response: Response): Promise<void> {
  if (response.text === '') return;
  answerUser(response);
  await ctx.out.write(response.text + '\n');
}
