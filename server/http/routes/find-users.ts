/**
 * `GET /users` with `filter`, `sort` or `count=true` (API.md "Finding
 * users: filter, sort, count"): the parameters parsed and refused here, the
 * store's find, and the page with `next` (the query again, with the cursor
 * of where the page ends) and `total`. With a filter or a sort the cursor
 * is opaque (users/cursor.ts); with `count=true` alone it is the last id,
 * as in the plain listing.
 */
import { USERS_PATH } from '../../../shared/endpoints.js';
import { problems } from '../../../shared/problems.js';
import { HttpError } from '../../errors.js';
import type { FindSignal, FoundPage, MaybePromise, Store, UserQuery } from '../../store/store.js';
import { decodeCursor, encodeCursor, type Listing } from '../../users/cursor.js';
import { foldedPaths } from '../../users/declared-fields.js';
import { parseFilter, type Filter } from '../../users/filter-parse.js';
import { parseSort, type SortEntry, type SortKey } from '../../users/sort.js';
import { aliasMap, DEFAULT_PAGE, flagParam, integerParam, MAX_PAGE } from '../listing.js';
import type { QueryParams } from '../query-params.js';
import { parameter } from '../openapi.js';
import { sendJson } from '../response.js';
import type { Context } from '../route.js';

/** True when the query asks to find rather than list: it has `filter`, `sort` or `count`. */
export function isFindQuery(params: QueryParams): boolean {
  return params.has('filter') || params.has('sort') || params.has('count');
}

/**
 * Answers a find; the caller has checked that the client may read. No
 * promise when the store answers at once (an index's unique `eq`).
 */
export function findUsers(ctx: Context, store: Store, params: QueryParams): void | Promise<void> {
  const request = findRequestOf(params, store);
  const page = untilClosed(ctx, (signal) => store.findUsers(request.query(signal)));
  if (page instanceof Promise) return page.then((found) => found && sendFound(ctx, found, request));
  sendFound(ctx, page, request);
}

/** A find's query, what its `next` repeats, and the listing of its cursor (false: `after` is an id). */
interface FindRequest {
  readonly query: (signal: FindSignal) => UserQuery;
  readonly repeated: Repeated;
  readonly listing: Listing | false;
}

function findRequestOf(params: QueryParams, store: Store): FindRequest {
  const limit = integerParam(params, 'limit', DEFAULT_PAGE, 1, MAX_PAGE);
  const filterText = singleParam(params, 'filter');
  const filter = filterText === undefined ? undefined : filterOf(filterText);
  const sortText = singleParam(params, 'sort');
  const sort = sortText === undefined ? [] : sortOf(sortText);
  const count = flagParam(params, 'count');
  const withAliases = flagParam(params, 'aliases');
  // One view of the declarations for the whole request: the cursor read, the find and the next cursor agree.
  const folded = foldedPaths(store.declaredFields());
  const listing = { filter, sort, folded };
  const keyed = filter !== undefined || sort.length > 0;
  const after = keyed ? cursorOf(params, listing) : idAfter(params);
  return {
    query: (signal) => ({ filter, sort, after, limit, count, signal, folded }),
    repeated: { filterText, sortText, count, limit, withAliases },
    listing: keyed && listing,
  };
}

function sendFound(ctx: Context, page: FoundPage, { repeated, listing }: FindRequest): void {
  const next = nextOf(page.next, repeated, listing);
  const aliases = repeated.withAliases ? `,"aliases":${aliasMap(page)}` : '';
  const total = repeated.count ? `,"total":${page.total}` : '';
  sendJson(ctx.res, 200, `{"items":[${itemsText(page.items)}]${aliases},"next":${next}${total}}`);
}

/** The items' texts joined by commas; a lone item (a unique field's `eq`) as it is, where a join would copy it. */
function itemsText(items: readonly string[]): string {
  return items.length === 1 ? items[0]! : items.join(',');
}

/** The one value of a parameter, or undefined when it is absent; given twice: 400. */
function singleParam(params: QueryParams, name: string): string | undefined {
  const values = params.getAll(name);
  if (values.length > 1)
    throw new HttpError(
      problems.invalidQuery,
      `give ${name} once, not ${values.length} times.`,
      {},
      { parameter: name },
    );
  return values[0];
}

function filterOf(text: string): Filter {
  const parsed = parseFilter(text);
  if (parsed.ok) return parsed.filter;
  throw new HttpError(
    problems.invalidFilter,
    `The filter does not parse ${parsed.detail}.`,
    {},
    { column: parsed.column },
  );
}

function sortOf(text: string): SortKey[] {
  const parsed = parseSort(text);
  if (parsed.ok) return parsed.keys;
  throw new HttpError(problems.invalidQuery, `${parsed.detail}.`, {}, { parameter: 'sort' });
}

/** The place an opaque `after` names, checked against this listing; undefined without one. */
function cursorOf(params: QueryParams, listing: Listing): SortEntry | undefined {
  const text = singleParam(params, 'after');
  if (text === undefined) return undefined;
  const decoded = decodeCursor(text, listing);
  if (decoded.ok) return decoded.position;
  throw new HttpError(problems.invalidCursor, `${decoded.detail}.`);
}

/** `after=ID` of a count without filter or sort, as in the plain listing. */
function idAfter(params: QueryParams): SortEntry | undefined {
  const id = integerParam(params, 'after', 0, 0, Number.MAX_SAFE_INTEGER);
  return id === 0 ? undefined : { id, values: [] };
}

/**
 * The store's page, or undefined when the client went away first: the
 * find is told through its signal and stops at its next step, and nothing
 * is answered to a closed connection. A page answered at once needs no
 * watch on the connection (its close is an event, never sooner).
 */
function untilClosed(ctx: Context, find: (signal: FindSignal) => MaybePromise<FoundPage>) {
  const gone = { aborted: false };
  const found = find(gone);
  return found instanceof Promise ? whileOpen(ctx, found, gone) : found;
}

/** `found`, or undefined when the response closed first, which sets `gone.aborted`. */
async function whileOpen(ctx: Context, found: Promise<FoundPage>, gone: { aborted: boolean }) {
  const abort = () => {
    gone.aborted = true;
  };
  ctx.res.once('close', abort);
  try {
    return await found;
  } catch (error) {
    if (gone.aborted) return undefined;
    throw error;
  } finally {
    ctx.res.off('close', abort);
  }
}

interface Repeated {
  readonly filterText: string | undefined;
  readonly sortText: string | undefined;
  readonly count: boolean;
  readonly limit: number;
  readonly withAliases: boolean;
}

/** `next` as JSON: the query again with the cursor of `position`, or null. */
function nextOf(position: SortEntry | undefined, query: Repeated, keyed: false | Listing): string {
  if (position === undefined) return 'null';
  const next = new URLSearchParams();
  if (query.filterText !== undefined) next.set('filter', query.filterText);
  if (query.sortText !== undefined) next.set('sort', query.sortText);
  if (query.count) next.set('count', 'true');
  next.set('limit', String(query.limit));
  if (query.withAliases) next.set('aliases', 'true');
  next.set('after', keyed === false ? String(position.id) : encodeCursor(position, keyed));
  return JSON.stringify(`${USERS_PATH}?${next}`);
}

// ------------------------------------------------------------ OpenAPI

/** The parameters of a find, for the operation of `GET /users`. */
export const FIND_PARAMETERS = [parameter('filter'), parameter('sort'), parameter('count')];

export const FIND_DESCRIPTION =
  'With `filter`, `sort` or `count=true` it finds users (docs/api.md "Finding users"): `after` is then the opaque cursor of `next` (with `count=true` alone, an id), `total` comes with `count=true`, and a filter that no index serves is answered in bounded steps: a page may hold fewer than `limit` items, even none, while `next` is not null.';
