/** watch: follows the feed of changes (GET /changes), reconnecting with the last cursor. */
import { CHANGES_PATH } from '../../shared/endpoints.js';
import { single, statusError } from '../client.js';
import type { Context } from '../context.js';
import { EXIT, NetworkError, StatusError, UsageError } from '../exit-codes.js';

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
 * following. When the connection drops or the server stops, it connects
 * again (with backoff) from the last cursor it printed, so nothing is
 * missed or printed twice. A refusal (a cursor no longer kept, no access)
 * ends it with the server's sentence; after the feed was followed (a
 * session or token that stopped holding), with the cursor to resume from
 * as well. On SIGINT, SIGTERM or a closed
 * output it stops and says the last cursor, for `--since` next time.
 */
export async function watch(ctx: Context, options: WatchOptions): Promise<number> {
  if (options.since !== undefined && options.fromStart === true) throw new UsageError('--since and --from-start are alternatives: give one');
  if (options.since !== undefined && !/^\d{1,16}$/.test(options.since)) throw new UsageError(`--since ${JSON.stringify(options.since)} is not a cursor: give one the feed printed (its "cursor")`);
  let cursor = options.fromStart === true ? '0' : options.since;
  const aborts = new AbortController();
  /** Set once a feed was answered: a refusal after that says where to resume. */
  let followed = false;
  ctx.interruption.onStop(() => aborts.abort());
  for (let failures = 0; ctx.interruption.reason === undefined; ) {
    try {
      const since = cursor === undefined ? '' : `&since=${cursor}`;
      const follow = options.follow !== false;
      let partial = '';
      const response = await ctx.client.stream(
        { method: 'GET', path: `${CHANGES_PATH}?follow=${follow ? 1 : 0}${since}`, headers: { accept: 'application/x-ndjson' } },
        {
          idleMs: IDLE_MS,
          signal: aborts.signal,
          onHeaders: (headers) => {
            failures = 0;
            followed = true;
            cursor ??= single(headers['x-changes-cursor']);
          },
          onChunk: async (text) => {
            const lines = (partial + text).split('\n');
            partial = lines.pop()!;
            let out = '';
            let last = cursor;
            for (const line of lines) {
              if (line === '') continue;
              out += line + '\n';
              last = (JSON.parse(line) as { cursor: string }).cursor;
            }
            await ctx.out.write(out);
            // A write that failed (a full disk) did not print these lines: the cursor to resume from stays before them.
            if (ctx.out.failure === undefined) cursor = last;
            if (ctx.interruption.reason !== undefined) aborts.abort();
          },
        },
      );
      if (response.status !== 200) throw resumable(statusError(response, `${ctx.client.origin}${CHANGES_PATH}`), followed ? cursor : undefined);
      if (!follow) break;
      // The server ended the feed (it stopped): connect again at once, to it or another instance.
    } catch (error) {
      if (ctx.interruption.reason !== undefined) break;
      if (!(error instanceof NetworkError)) throw error;
      failures++;
      const wait = (0.5 + Math.random() / 2) * Math.min(RECONNECT_FIRST_MS * 2 ** (failures - 1), RECONNECT_MAX_MS);
      ctx.info(`${error.message}; connecting again in ${(wait / 1000).toFixed(1)} s${cursor === undefined ? '' : ` from cursor ${cursor}`}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, wait);
        aborts.signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
      });
    }
  }
  const stop = ctx.interruption.reason;
  if (stop !== undefined) {
    ctx.fail(`stopped (${ctx.interruption.label})${cursor === undefined ? '' : `; the last cursor is ${cursor}: resume with usersctl watch --since ${cursor}`}`);
    ctx.stopReported = true;
  }
  return EXIT.ok;
}

/** A refusal of a feed that was followed before, with where to resume (not for 410: that cursor is gone). */
function resumable(error: StatusError, cursor: string | undefined): StatusError {
  if (cursor === undefined || error.status === 410) return error;
  return new StatusError(error.status, `${error.detail} The last cursor is ${cursor}: resume with usersctl watch --since ${cursor}`, error.type, error.title);
}
