import type { ServerResponse } from 'node:http';
import { CHANGES_PATH } from '../../../shared/endpoints.js';
import { problems } from '../../../shared/problems.js';
import { HttpError } from '../../errors.js';
import { QueryParams } from '../query-params.js';
import type { Change, MaybePromise, Store } from '../../store/store.js';
import type { AccessControl } from '../access-control.js';
import { headers, NEEDS_SESSION_TO_READ, SESSION_OPTIONAL } from '../openapi.js';
import type { Context, Route, RouteDeps } from '../route.js';

const NDJSON_TYPE = 'application/x-ndjson';
const EVENT_STREAM_TYPE = 'text/event-stream';

/** Changes read from the store at once, while catching up or following. */
const PAGE = 1000;
/**
 * A following feed checks its session or token again this often and, while
 * they hold, sends an empty line (SSE: a comment), so that proxies keep an
 * idle feed open.
 */
const FEED_HEARTBEAT_MS = 15_000;
/**
 * Bytes a following feed may have waiting unsent; a watcher that lets more pile up is cut (and resumes from its
 * cursor).
 */
const FEED_MAX_BUFFERED = 1 << 20;
/**
 * A following feed's share of the wait before all feeds send what they
 * heard of (ChangeFeeds.announced), in ms: none below 10 feeds, 10 ms with
 * 100, FEED_TURN_MAX_MS from 1,000 on.
 */
const FEED_TURN_MS_PER_FEED = 0.1;
const FEED_TURN_MAX_MS = 100;
/** How long a catching-up feed waits for its reader to take what was sent before it is cut. */
const DRAIN_WAIT_MS = 30_000;

/** A following feed, as the feeds see it. */
interface Following {
  /** Sends what became durable since its last change sent. */
  readonly pump: () => Promise<void>;
  /** Checks its credentials again; ends it once they no longer hold. */
  recheck(): void;
}

/** A page of changes framed for sending: its bytes, how many, the last one's number, and where the kept ones begin. */
interface FramedPage {
  /** Bytes, not text: every feed at the same place writes the same buffer, and none encodes it again. */
  bytes: Buffer;
  count: number;
  lastSeq: number;
  trimmedThrough: number;
}

/**
 * The feeds of changes under way: counted for /metrics, sent to at each announcement of the store, ended when the
 * server stops.
 */
export class ChangeFeeds {
  /**
   * Pages read since the store last announced changes, by place and
   * framing: following feeds at the same place share one read and one
   * framing. Emptied at each announcement, before the feeds are pumped.
   */
  private readonly pages = new Map<string, Promise<FramedPage>>();
  private unsubscribe: (() => void) | undefined;
  /** The following feeds, by response. */
  private readonly following = new Map<ServerResponse, Following>();
  /** Set while the feeds wait for their next turn (announced). */
  private turn: NodeJS.Timeout | undefined;
  /** Lines sent, and feeds cut for a reader too slow, since the start. */
  lines = 0;
  cut = 0;

  get open(): number {
    return this.following.size;
  }

  private ended = false;

  constructor(private readonly store: Store) {}

  /** Counts a following feed, pumped at each announcement; false once the server stops (the feed ends at once). */
  add(res: ServerResponse, feed: Following): boolean {
    if (this.ended) return false;
    this.following.set(res, feed);
    this.unsubscribe ??= this.store.onChanges(this.announced);
    return true;
  }

  delete(res: ServerResponse): void {
    this.following.delete(res);
    if (this.following.size > 0 || this.unsubscribe === undefined) return;
    this.unsubscribe();
    this.unsubscribe = undefined;
    this.pages.clear();
    clearTimeout(this.turn);
    this.turn = undefined;
  }

  /**
   * The store's one listener for all the feeds: the pages read before are
   * stale. While few feeds follow, each is pumped now; with more, all of
   * them at their next turn, FEED_TURN_MS_PER_FEED ms per feed after the
   * first change heard of (at most FEED_TURN_MAX_MS). Every feed then
   * writes once per page of changes: under a stream of writes, a thousand
   * feeds writing once per commit would take the event loop from the
   * writes, while a turn gathers a window of commits into one write per
   * feed, and an announcement costs the same with one feed or thousands.
   */
  private readonly announced = (): void => {
    this.pages.clear();
    const window = Math.min(FEED_TURN_MAX_MS, Math.floor(this.following.size * FEED_TURN_MS_PER_FEED));
    if (window < 1) return this.pumpAll();
    this.turn ??= setTimeout(this.pumpAll, window).unref();
  };

  private readonly pumpAll = (): void => {
    this.turn = undefined;
    for (const feed of [...this.following.values()]) void feed.pump();
  };

  /**
   * Checks every following feed's session or token now, as each does every FEED_HEARTBEAT_MS: those no longer valid
   * end.
   */
  recheck(): void {
    for (const feed of [...this.following.values()]) feed.recheck();
  }

  /** The changes after `after` framed by `framing`, read once per announcement for all the feeds that ask. */
  page(after: number, framing: Framing): Promise<FramedPage> {
    const key = `${after} ${framing.type}`;
    let page = this.pages.get(key);
    if (page === undefined) {
      page = Promise.resolve(this.store.changesAfter(after, PAGE)).then(({ changes, trimmedThrough }) => {
        let text = '';
        for (const change of changes) text += framing.frame(change);
        return {
          bytes: Buffer.from(text),
          count: changes.length,
          lastSeq: changes.at(-1)?.seq ?? after,
          trimmedThrough,
        };
      });
      this.pages.set(key, page);
      // A failed read is not kept: the next feed to ask reads again.
      const kept = page;
      kept.then(undefined, () => this.pages.get(key) === kept && this.pages.delete(key));
    }
    return page;
  }

  /** Ends every following feed: the server is stopping, and its readers resume elsewhere with their cursors. */
  endAll(): void {
    this.ended = true;
    clearTimeout(this.turn);
    for (const res of this.following.keys()) res.end();
    this.following.clear();
  }
}

/** The cursor of a change: its number, as text (opaque to clients). */
function cursorOf(seq: number): string {
  return String(seq);
}

/** A cursor's number, or undefined for text that is no cursor. */
function parseCursor(text: string): number | undefined {
  if (!/^(0|[1-9]\d{0,15})$/.test(text)) return undefined;
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : undefined;
}

/** A change's line: `{"cursor","op","id","from"?,"user"?}` (the representation as stored, not parsed again). */
function changeLine(change: Change): string {
  const from = change.from === undefined ? '' : `,"from":${change.from}`;
  const user = change.json === undefined ? '' : `,"user":${change.json}`;
  return `{"cursor":"${cursorOf(change.seq)}","op":"${change.op}","id":${change.id}${from}${user}}`;
}

/** How a feed is written: NDJSON, or Server-Sent Events. */
interface Framing {
  type: string;
  frame(change: Change): string;
  heartbeat: string;
}

const NDJSON: Framing = { type: NDJSON_TYPE, frame: (change) => changeLine(change) + '\n', heartbeat: '\n' };
const SSE: Framing = {
  type: `${EVENT_STREAM_TYPE}; charset=utf-8`,
  frame: (change) => `id: ${cursorOf(change.seq)}\nevent: ${change.op}\ndata: ${changeLine(change)}\n\n`,
  heartbeat: ':\n\n',
};

/**
 * GET /changes: the changes of users committed after a cursor, in commit
 * order, as NDJSON; `follow=1` keeps the response open and sends each
 * change once durable; `Accept: text/event-stream` gives the same feed as
 * Server-Sent Events (always following, resumed with Last-Event-ID). Read
 * access as GET /users.
 */
export function changesRoute(deps: RouteDeps, feeds: ChangeFeeds): Route {
  const { store, access } = deps;
  return {
    method: 'GET',
    path: CHANGES_PATH,
    handler: async (ctx) => {
      await access.authorize(ctx, 'read');
      const sse = (ctx.req.headers.accept ?? '').includes(EVENT_STREAM_TYPE);
      const params = new QueryParams(ctx.query);
      const follow = followParam(params) || sse;
      const lastEventId = sse ? ctx.req.headers['last-event-id'] : undefined;
      const after = await startAfter(
        store,
        typeof lastEventId === 'string' ? lastEventId : (params.get('since') ?? undefined),
      );
      // HEAD: the fields a GET would start with, and the end: it has no body to follow with.
      const until = ctx.req.method === 'HEAD' ? after.from : follow ? undefined : after.present;
      await new Feed(store, { access, clock: deps.clock ?? Date.now }, ctx, sse ? SSE : NDJSON, feeds).run(
        after.from,
        until,
      );
    },
    doc: CHANGES_DOC,
  };
}

/**
 * `follow`: 1 or true follows, 0 or false (or none) ends after the changes
 * kept; anything else is refused rather than read as "no", which would end
 * a feed its reader meant to follow.
 */
function followParam(params: QueryParams): boolean {
  const values = params.getAll('follow');
  if (values.length === 0) return false;
  if (values.length === 1 && FOLLOW_VALUES.has(values[0]!)) return FOLLOW_VALUES.get(values[0]!)!;
  throw new HttpError(
    problems.invalidQuery,
    'follow must be 1 or true (0, false or absent: the feed ends after the changes kept).',
    {},
    { parameter: 'follow' },
  );
}

const FOLLOW_VALUES = new Map([
  ['1', true],
  ['true', true],
  ['0', false],
  ['false', false],
]);

/** Where a feed starts (the number after which it sends) and the newest number now. */
async function startAfter(store: Store, since: string | undefined): Promise<{ from: number; present: number }> {
  const head = await store.changesAfter(Number.MAX_SAFE_INTEGER, 0);
  if (since === undefined) return { from: head.lastSeq, present: head.lastSeq };
  const n = parseCursor(since);
  if (n === undefined || n > head.lastSeq)
    throw new HttpError(
      problems.invalidCursor,
      `${JSON.stringify(since.slice(0, 40))} is not a cursor of this server: give one a change carried, 0 for the oldest change kept, or none for changes from now on.`,
    );
  if (n === 0) return { from: head.trimmedThrough, present: head.lastSeq };
  if (n < head.trimmedThrough) {
    throw new HttpError(
      problems.changesExpired,
      `The changes after this cursor are no longer kept; the oldest cursor kept is ${cursorOf(head.trimmedThrough)} (since=0 starts there).`,
      {},
      { oldestCursor: cursorOf(head.trimmedThrough) },
    );
  }
  return { from: n, present: head.lastSeq };
}

/** One response of the feed: catches up from a number, then (following) sends changes as they become durable. */
class Feed implements Following {
  private sent: number;
  private pumping = false;
  private again = false;
  private closed = false;

  constructor(
    private readonly store: Store,
    /** What a check of the feed's credentials again asks. */
    private readonly credentials: { access: AccessControl; clock: () => number },
    private readonly ctx: Context,
    private readonly framing: Framing,
    private readonly feeds: ChangeFeeds,
  ) {
    this.sent = 0;
  }

  /**
   * Sends the changes after `from`; up to `until` and ends, or (undefined) follows until the reader or the server goes.
   */
  async run(from: number, until: number | undefined): Promise<void> {
    const { res } = this.ctx;
    this.sent = from;
    // X-Changes-Cursor: where this feed starts, so that a reader that got no line yet can resume from there.
    res.writeHead(200, {
      'Content-Type': this.framing.type,
      'Cache-Control': 'no-store',
      'X-Accel-Buffering': 'no',
      'X-Changes-Cursor': cursorOf(from),
    });
    // Sent now, not with the first change: a reader knows at once that it follows from here.
    res.flushHeaders();
    res.once('close', () => (this.closed = true));
    if (until !== undefined) {
      await this.catchUp(until);
      if (!this.closed) res.end();
      return;
    }
    if (!this.feeds.add(res, this)) return void res.end();
    const heartbeat = setInterval(() => this.recheck(() => this.write(this.framing.heartbeat)), FEED_HEARTBEAT_MS);
    res.once('close', () => {
      clearInterval(heartbeat);
      this.feeds.delete(res);
    });
    await this.pump();
  }

  /** Sends every change up to `until` (catching up), waiting for the reader between pages. */
  private async catchUp(until: number): Promise<void> {
    while (!this.closed && this.sent < until) {
      const page = await this.store.changesAfter(this.sent, Math.min(PAGE, until - this.sent));
      if (!this.sendPage(page.changes, page.trimmedThrough)) return;
      if (page.changes.length === 0) return;
      if (this.ctx.res.writableNeedDrain) await this.drained();
    }
  }

  /** Sends what became durable since the last change sent; one pump at a time, again if asked meanwhile. */
  readonly pump = async (): Promise<void> => {
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.again = false;
        for (;;) {
          if (this.closed) return;
          const page = await this.feeds.page(this.sent, this.framing);
          if (!this.sendFramed(page) || page.count < PAGE) break;
        }
      } while (this.again);
    } catch {
      // The store failed a read (the database away): the reader resumes with its cursor.
      this.ctx.res.destroy();
    } finally {
      this.pumping = false;
    }
  };

  /**
   * Checks the session or token the feed began with, as at its start: once
   * it is revoked, expired or its account gone (401, 403), the feed ends,
   * and the reader's next request is told why. `then` runs while it holds,
   * and also when the store cannot answer now (the next check asks again).
   */
  recheck(then?: () => void): void {
    const settle = (error?: unknown) => {
      if (error instanceof HttpError && (error.status === 401 || error.status === 403)) this.end();
      else then?.();
    };
    let checked: MaybePromise<void>;
    try {
      checked = this.credentials.access.authorize(
        { req: this.ctx.req, res: undefined, now: this.credentials.clock() },
        'read',
      );
    } catch (error) {
      return settle(error);
    }
    if (checked instanceof Promise) checked.then(() => settle(), settle);
    else settle();
  }

  /** Ends the response in order (what was sent stays whole): the reader resumes with its last cursor. */
  private end(): void {
    if (this.closed) return;
    this.closed = true;
    this.ctx.res.end();
  }

  /** Writes a page; false (and the feed cut) when the reader fell behind the retention or lets too much pile up. */
  private sendPage(changes: readonly Change[], trimmedThrough: number): boolean {
    const { res } = this.ctx;
    // Changes after the last one sent were dropped meanwhile: a resume will say so (410).
    if (trimmedThrough > this.sent) return this.cut();
    if (changes.length === 0) return true;
    let text = '';
    for (const change of changes) text += this.framing.frame(change);
    this.sent = changes[changes.length - 1]!.seq;
    this.feeds.lines += changes.length;
    this.write(text);
    return res.writableLength <= FEED_MAX_BUFFERED || this.cut();
  }

  /** `sendPage` of a page framed once for every feed at the same place. */
  private sendFramed(page: FramedPage): boolean {
    if (page.trimmedThrough > this.sent) return this.cut();
    if (page.count === 0) return true;
    this.sent = page.lastSeq;
    this.feeds.lines += page.count;
    this.write(page.bytes);
    return this.ctx.res.writableLength <= FEED_MAX_BUFFERED || this.cut();
  }

  private write(chunk: string | Buffer): void {
    if (!this.closed) this.ctx.res.write(chunk);
  }

  /** Ends the feed at once, counted: the reader resumes with the last cursor it received. */
  private cut(): false {
    this.feeds.cut++;
    this.ctx.res.destroy();
    return false;
  }

  /**
   * Resolves once the reader took what was sent, or the feed closed; cuts a reader that takes nothing for
   * DRAIN_WAIT_MS.
   */
  private drained(): Promise<void> {
    const { res } = this.ctx;
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      const timer = setTimeout(() => {
        this.cut();
        done();
      }, DRAIN_WAIT_MS);
      res.once('drain', done);
      res.once('close', done);
    });
  }
}

const CHANGES_DOC = {
  operationId: 'getChanges',
  summary: 'The changes of users after a cursor, in commit order',
  description:
    'One JSON object a line for each put, delete or move committed after `since` (none: from now on; 0: from the oldest change kept), then the response ends; ' +
    '`follow=1` keeps it open and sends each change once durable, with an empty line every 15 s. `Accept: text/event-stream` gives the same feed as ' +
    `Server-Sent Events (id: the cursor, event: the op), resumed after \`Last-Event-ID\`. ${NEEDS_SESSION_TO_READ}`,
  tags: ['users'],
  security: SESSION_OPTIONAL,
  parameters: [
    {
      name: 'since',
      in: 'query',
      required: false,
      schema: { type: 'string' },
      description: 'A cursor the feed gave, or 0.',
    },
    {
      name: 'follow',
      in: 'query',
      required: false,
      schema: { type: 'string', enum: ['1', 'true', '0', 'false'] },
      description: '1 or true: keep the response open. Any other value is 400.',
    },
    {
      name: 'Last-Event-ID',
      in: 'header',
      required: false,
      schema: { type: 'string' },
      description: 'Server-Sent Events: resume after this cursor.',
    },
  ],
  responses: {
    '200': {
      description:
        'The changes, a line each: `{"cursor":"...","op":"put"|"delete"|"move","id":N,"from"?:N,"user"?:{...}}`.',
      headers: headers(),
      content: { [NDJSON_TYPE]: { schema: { type: 'string' } }, [EVENT_STREAM_TYPE]: { schema: { type: 'string' } } },
    },
  },
  problems: [400, 401, 410],
} as const;
