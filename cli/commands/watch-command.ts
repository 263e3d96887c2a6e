/** watch: follows the feed of changes (GET /changes), reconnecting with the last cursor. */
import { CHANGES_PATH } from '../../shared/endpoints.js';
import { jsonObject, single, statusError } from '../answers.js';
import { MAX_ANSWER_BYTES, retryAfterMs, worthRetrying } from '../client.js';
import type { Context } from '../context.js';
import { EXIT, NetworkError, StatusError, UnexpectedAnswerError, CliUsageError } from '../exit-codes.js';

export interface WatchOptions {
  since?: string;
  fromStart?: boolean;
  /** Commander's --no-follow: false to print what was committed so far and exit. */
  follow?: boolean;
}

/** A following feed sends an empty line every 15 s: three missed mean the connection is dead. */
const IDLE_MS = 45_000;
/** Reconnection backoff: from this, doubling, up to RECONNECT_MAX_MS, jittered. */
const RECONNECT_FIRST_MS = 250;
const RECONNECT_MAX_MS = 10_000;

/**
 * Prints every change of the feed as the server sends it, a line each,
 * following. When the connection drops, the server stops or it answers
 * "not now" (503 while its database is out of reach, a proxy's 502), it
 * connects again (with backoff) from the last cursor it printed, so nothing
 * is missed or printed twice. A refusal (a cursor no longer kept, no access)
 * ends it with the server's sentence; after the feed was followed (a
 * session or token that stopped holding), with the cursor to resume from
 * as well. On SIGINT, SIGTERM or a closed
 * output it stops and says the last cursor, for `--since` next time.
 */
export async function watch(ctx: Context, options: WatchOptions): Promise<number> {
  if (options.since !== undefined && options.fromStart === true)
    throw new CliUsageError('--since and --from-start are alternatives: give one');
  if (options.since !== undefined && !CURSOR.test(options.since))
    throw new CliUsageError(
      `--since ${JSON.stringify(options.since)} is not a cursor: give one the feed printed (its "cursor")`,
    );
  const follow = options.follow !== false;
  const feed = new FeedReader(ctx, options.fromStart === true ? '0' : options.since);
  const aborts = new AbortController();
  /** Set once a feed was answered: a refusal after that says where to resume. */
  let followed = false;
  ctx.interruption.onStop(() => aborts.abort());
  // An idle feed writes nothing for hours: `watch | head -n 3` must not wait for the next change to learn that head has
  // exited.
  ctx.out.noticeReaderGone(() => aborts.abort());
  for (let failures = 0; ctx.interruption.reason === undefined;) {
    /**
     * Why this attempt found no feed, when another may: what to say, and what ends a --no-follow run past its retries.
     */
    let notNow: { why: string; error: Error; atLeastMs?: number | undefined };
    try {
      const since = feed.cursor === undefined ? '' : `&since=${feed.cursor}`;
      feed.reset();
      const response = await ctx.client.stream(
        {
          method: 'GET',
          path: `${CHANGES_PATH}?follow=${follow ? 1 : 0}${since}`,
          headers: { accept: 'application/x-ndjson' },
        },
        {
          idleMs: IDLE_MS,
          signal: aborts.signal,
          onHeaders: (headers) => {
            failures = 0;
            followed = true;
            feed.cursor ??= single(headers['x-changes-cursor']);
          },
          onChunk: async (text) => {
            await feed.print(text);
            if (ctx.interruption.reason !== undefined) aborts.abort();
          },
        },
      );
      if (response.status === 200) {
        // users-server ends every change with a newline: a feed that ends within a line was not its.
        if (feed.cutOff() && ctx.interruption.reason === undefined)
          throw new UnexpectedAnswerError('a feed of changes that ends within a line');
        if (!follow) break;
        // The server ended the feed (it stopped): connect again at once, to it or another instance.
        continue;
      }
      const refused = resumable(
        statusError(response, ctx.client.urlOf(CHANGES_PATH), CHANGES_PATH),
        followed ? feed.cursor : undefined,
      );
      // A refusal ends it; "not now" (a database out of reach, a proxy while the server restarts) is waited out like a
      // dropped connection.
      if (!worthRetrying('GET', response)) throw refused;
      notNow = {
        why: `the server answered ${response.status}: ${refused.detail.replace(/\.$/, '')}`,
        error: refused,
        atLeastMs: retryAfterMs(response.headers['retry-after']),
      };
    } catch (error) {
      if (ctx.interruption.reason !== undefined) break;
      if (!(error instanceof NetworkError)) throw error;
      notNow = { why: error.message, error: withCursor(error, followed ? feed.cursor : undefined) };
    }
    failures++;
    // Without --no-follow it waits for the server however long; with it, a script waits no longer than any other
    // command's retries.
    if (!follow && failures > ctx.options.retries) throw notNow.error;
    await backOff(ctx, notNow.why, failures, feed.cursor, aborts.signal, notNow.atLeastMs);
  }
  const stop = ctx.interruption.reason;
  if (stop !== undefined) {
    ctx.fail(
      `stopped (${ctx.interruption.label})${feed.cursor === undefined ? '' : `; the last cursor is ${feed.cursor}: resume with usersctl watch --since ${feed.cursor}`}`,
    );
    ctx.stopReported = true;
  }
  return EXIT.ok;
}

const CURSOR = /^\d{1,16}$/;

/**
 * Prints the feed's complete lines as they come, and keeps the cursor of
 * the last one printed. The start of a line whose end has not come yet is
 * kept in pieces, joined once its end comes: a long line costs its length
 * once, and one past MAX_ANSWER_BYTES (no change of users-server is) ends
 * the command instead of filling the memory.
 */
class FeedReader {
  private pieces: string[] = [];
  private held = 0;

  constructor(
    private readonly ctx: Context,
    public cursor: string | undefined,
  ) {}

  /** Forgets a line cut off with its connection: it comes again whole after the cursor. */
  reset(): void {
    this.pieces = [];
    this.held = 0;
  }

  /** True when the feed ended within a line. */
  cutOff(): boolean {
    return this.pieces.join('').trim() !== '';
  }

  async print(text: string): Promise<void> {
    const end = text.lastIndexOf('\n');
    if (end < 0) {
      this.hold(text);
      return;
    }
    const lines = (this.pieces.join('') + text.slice(0, end)).split('\n');
    this.reset();
    this.hold(text.slice(end + 1));
    let out = '';
    let last = this.cursor;
    try {
      for (const line of lines) {
        if (line === '') continue;
        const { cursor } = jsonObject(line, 'a change');
        if (typeof cursor !== 'string' || !CURSOR.test(cursor))
          throw new UnexpectedAnswerError('a change without a "cursor"');
        out += line + '\n';
        last = cursor;
      }
    } finally {
      // What came before a line that is not a change is printed all the same.
      // A write that failed (a full disk, a reader gone) may not have given
      // these lines to the reader: the cursor to resume from stays at the
      // last line of the last write that succeeded.
      await this.ctx.out.write(out);
      if (!this.ctx.out.stopped) this.cursor = last;
    }
  }

  private hold(piece: string): void {
    if (piece === '') return;
    this.held += piece.length;
    if (this.held > MAX_ANSWER_BYTES)
      throw new UnexpectedAnswerError(`a change longer than ${MAX_ANSWER_BYTES / 1024 / 1024} MiB`);
    this.pieces.push(piece);
  }
}

/**
 * Says why and waits before connecting again: from RECONNECT_FIRST_MS,
 * doubling, jittered, and no sooner than the server's Retry-After (up to
 * RECONNECT_MAX_MS); an abort ends the wait.
 */
async function backOff(
  ctx: Context,
  why: string,
  failures: number,
  cursor: string | undefined,
  signal: AbortSignal,
  atLeastMs = 0,
): Promise<void> {
  const backoff = (0.5 + Math.random() / 2) * Math.min(RECONNECT_FIRST_MS * 2 ** (failures - 1), RECONNECT_MAX_MS);
  const wait = Math.max(backoff, Math.min(atLeastMs, RECONNECT_MAX_MS));
  ctx.info(
    `${why}; connecting again in ${(wait / 1000).toFixed(1)} s${cursor === undefined ? '' : ` from cursor ${cursor}`}`,
  );
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, wait);
    signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });
}

/** A network failure that ends a --no-follow run, with where to go on from when something was printed. */
function withCursor(error: NetworkError, cursor: string | undefined): NetworkError {
  return cursor === undefined
    ? error
    : new NetworkError(
        `${error.message}; the last cursor is ${cursor}: resume with usersctl watch --since ${cursor}`,
        error.code,
      );
}

/** A refusal of a feed that was followed before, with where to resume (not for 410: that cursor is gone). */
function resumable(error: StatusError, cursor: string | undefined): StatusError {
  if (cursor === undefined || error.status === 410) return error;
  return new StatusError(
    error.status,
    `${error.detail} The last cursor is ${cursor}: resume with usersctl watch --since ${cursor}`,
    error.type,
    error.title,
  );
}
