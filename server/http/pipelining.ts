import type { Socket } from 'node:net';

/**
 * Clients that pipeline and never read (docs/operations.md "Abusive
 * clients"): a connection may have this many requests parsed and not yet
 * answered; with one more it is closed at once, nothing more of what was
 * read from it is parsed, and nothing after is served (RFC 9112 section
 * 9.3.2: a pipelining client retries what was left unanswered).
 */
export const PIPELINE_LIMIT = 64;

/**
 * Pipelined answers one connection gets in a row before the other
 * connections have a turn (Pipeline.yieldsTurn).
 */
export const ANSWERS_PER_TURN = 4;

/** Per connection: its requests parsed and not yet answered. */
export class Pipeline {
  open = 0;
  /** Past PIPELINE_LIMIT: the connection was closed, and nothing more on it is served. */
  over = false;
  /** Pipelined answers begun since this connection last let the others have a turn. */
  private inARow = 0;

  /**
   * A pipelined request's turn has come (the answer before it has ended):
   * true when it should wait for the event loop's next turn instead. Each
   * answer's end starts the next one's in one chain of callbacks that does
   * not return to the loop: without a break, one connection's whole
   * pipeline would be answered before another client's request is read.
   */
  yieldsTurn(): boolean {
    if (++this.inARow < ANSWERS_PER_TURN) return false;
    this.inARow = 0;
    return true;
  }
}

const guarded = Symbol('users-server.parse-guard');
type HeadersComplete = (this: ParserObject, ...args: unknown[]) => unknown;
interface ParserObject {
  socket?: Socket | null;
  [guarded]?: true;
  [slot: string]: unknown;
}

/**
 * node reads up to 64 KiB from a connection and parses all of it before
 * any listener can stop it: 1,600 pipelined GETs per read, each a request
 * and a response object, even when the connection was closed at the
 * first of them. Called when a connection is destroyed for going past
 * PIPELINE_LIMIT, this wraps the callback that node's parser calls at each
 * request's end of headers (the parser object's `parserOnHeadersComplete`
 * slot, node 20 to 24, which node's C++ side looks up at every call): once
 * the connection is destroyed it answers 2, which llhttp takes as "no
 * body, then another protocol" and stops parsing that read there. Only
 * the parsers of such connections are wrapped (a parser is reused across
 * connections, and keeps its wrapper): the wrapper costs every request it
 * sees about 500 instructions. Should a node version name the callback
 * otherwise, nothing is wrapped and the connection is still closed, only
 * after the rest of the read has been parsed.
 */
export function stopParsing(socket: Socket): void {
  const parser = (socket as Socket & { parser?: ParserObject | null }).parser;
  if (parser === null || parser === undefined || parser[guarded]) return;
  const slot = Object.keys(parser).find(
    (key) => (parser[key] as { name?: string } | undefined)?.name === 'parserOnHeadersComplete',
  );
  if (slot === undefined) return;
  const onHeadersComplete = parser[slot] as HeadersComplete;
  // node passes nine arguments; naming them spares a rest array per request.
  parser[slot] = function (
    this: ParserObject,
    a: unknown,
    b: unknown,
    c: unknown,
    d: unknown,
    e: unknown,
    f: unknown,
    g: unknown,
    h: unknown,
    i: unknown,
  ) {
    // Wrapped after the request that went past the limit had its headers: the next one is not made at all.
    if (closed(this)) return 2;
    const result = onHeadersComplete.call(this, a, b, c, d, e, f, g, h, i);
    return closed(this) ? 2 : result;
  };
  parser[guarded] = true;
}

function closed(parser: ParserObject): boolean {
  return parser.socket?.destroyed === true;
}
