import { randomBytes } from 'node:crypto';
import { ServerResponse, type IncomingMessage, type OutgoingHttpHeader, type OutgoingHttpHeaders } from 'node:http';
// Imported, not the global: in Node 20 the global `performance` is a getter
// on globalThis, called at each read: it makes each now() about a quarter slower.
import { performance } from 'node:perf_hooks';
import type { AccessLog } from '../ops/access-log.js';
import type { Metrics } from '../ops/metrics.js';
import type { Pipeline } from './pipelining.js';

/**
 * Per-request observation: the request id, the timing, and the access log
 * line and metrics written when the response ends. The server's responses
 * are ObservedResponses, whose fields hold what would otherwise need a
 * closure or a side table per request.
 */
export class ObservedResponse extends ServerResponse {
  /** performance.now() when the request's headers had been read. */
  startedAt = 0;
  /** The matched path's index in the route table (`Router.paths`); -1 for none. */
  routeSlot = -1;
  /** The X-Request-Id of this exchange. */
  requestId = '';
  /** Its server, asked when the head is written whether it is stopping; undefined outside one. */
  server: Stopping | undefined = undefined;
  /** The Content-Length given to writeHead in a header list (getHeader does not see those); -1 for none. */
  listedLength = -1;
  /** True once a header list carried X-Request-Id itself (`headerList`): writeHead adds nothing. */
  idListed = false;
  /** Called once when the response closes (finished or cut off), from `emit`. */
  onClose: ((res: ObservedResponse) => void) | undefined = undefined;
  /**
   * True once 'finish' was emitted: the whole answer was handed to the connection (what `writableFinished` says,
   * without its getter).
   */
  sent = false;
  /** Its connection's count of requests not yet answered (pipelining.ts). */
  pipeline: Pipeline | undefined = undefined;
  /**
   * ms: when the answer cannot all be sent at once (its client does not
   * read), its connection times out after this long with nothing moving
   * (Serving.onTimeout closes it); 0: never.
   */
  unreadTimeout = 0;

  /**
   * Ends the response as node does, then, when part of the answer waits
   * unsent, gives the connection the unread timeout; once the answer is
   * sent node replaces it with the keep-alive timeout.
   */
  override end(chunk?: unknown, encoding?: unknown, callback?: unknown): this {
    super.end(chunk as never, encoding as never, callback as never);
    const socket = this.socket;
    if (this.unreadTimeout > 0 && socket !== null && socket.writableLength > 0) socket.setTimeout(this.unreadTimeout);
    return this;
  }

  /**
   * Runs `onClose` and sets `sent` as the events pass: a listener per response costs a GET about 2% of its
   * instructions.
   */
  override emit(event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'close') {
      const onClose = this.onClose;
      this.onClose = undefined;
      if (onClose !== undefined) onClose(this);
    } else if (event === 'finish') this.sent = true;
    return super.emit(event, ...args);
  }

  /**
   * A header list for writeHead with X-Request-Id in it, built once by the
   * caller (sendJson): writeHead then copies nothing.
   */
  headerList(fields: string[], contentLength: number): string[] {
    const id = this.listedHead(contentLength);
    if (id !== '') fields.push(REQUEST_ID_HEADER, id);
    return fields;
  }

  /**
   * For a caller that builds the whole header list for writeHead itself
   * (`sendJsonWith`): the X-Request-Id to put in it ('' for none), and the
   * Content-Length it declares. writeHead then adds nothing.
   */
  listedHead(contentLength: number): string {
    this.listedLength = contentLength;
    this.idListed = this.requestId !== '';
    return this.requestId;
  }

  /**
   * Every response passes here, node's implicit headers included: this is
   * where X-Request-Id is added. Handlers that give their whole header list
   * at once (`sendJson`) leave node nothing to store per header, which is
   * the cheapest way node:http sends headers; a list is copied, never changed.
   */
  override writeHead(
    statusCode: number,
    reason?: string | OutgoingHttpHeaders | OutgoingHttpHeader[],
    headers?: OutgoingHttpHeaders | OutgoingHttpHeader[],
  ): this {
    if (typeof reason !== 'string') {
      headers = reason;
      reason = undefined;
    }
    // While its server stops, an answer does not keep its connection (node
    // merges a header list given here with the headers set before).
    if (this.server !== undefined && this.server.stopping) this.setHeader('Connection', 'close');
    if (this.requestId !== '' && !this.idListed) {
      if (Array.isArray(headers)) {
        for (let i = 0; i < headers.length; i += 2)
          if (headers[i] === 'Content-Length') this.listedLength = Number(headers[i + 1]);
        headers = [...headers, REQUEST_ID_HEADER, this.requestId];
      } else {
        this.setHeader(REQUEST_ID_HEADER, this.requestId);
      }
    }
    return reason === undefined ? super.writeHead(statusCode, headers) : super.writeHead(statusCode, reason, headers);
  }
}

/** What a response asks of its server: whether it is stopping. */
export interface Stopping {
  readonly stopping: boolean;
}

export const REQUEST_ID_HEADER = 'X-Request-Id';
/** Longest X-Request-Id taken from a request. */
const REQUEST_ID_MAX = 128;
/**
 * The status logged and counted for a response that did not complete: the
 * connection closed first (nginx's "client closed request").
 */
const CLOSED_EARLY = 499;

// A-Z a-z 0-9 . _ : -  -- safe in a header, a log line and a JSON string as they are.
const ID_CHARACTER = new Uint8Array(128);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-') ID_CHARACTER[c.charCodeAt(0)] = 1;

/** True when a client's X-Request-Id can be echoed: 1..128 of `A-Z a-z 0-9 . _ : -`. */
export function isSaneRequestId(value: string): boolean {
  if (value.length === 0 || value.length > REQUEST_ID_MAX) return false;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c >= 128 || ID_CHARACTER[c] === 0) return false;
  }
  return true;
}

export class Observer {
  /**
   * Random per process, so ids from two runs of the server do not collide; the counter makes them unique within one.
   */
  private readonly idPrefix = randomBytes(6).toString('hex') + '-';
  private idCounter = 0;

  constructor(
    readonly metrics: Metrics,
    /** Undefined with --log-format off. */
    readonly log: AccessLog | undefined,
  ) {}

  /** A new request id: cheaper than a UUID, and unique enough to find one exchange in the logs. */
  newId(): string {
    return this.idPrefix + (++this.idCounter).toString(36);
  }

  /**
   * Starts the clock and picks the X-Request-Id: the client's own when it is
   * sane, else a new one. `ObservedResponse.writeHead` sends it.
   */
  begin(req: IncomingMessage, res: ObservedResponse): void {
    res.startedAt = performance.now();
    const given = req.headers['x-request-id'];
    res.requestId = typeof given === 'string' && isSaneRequestId(given) ? given : this.newId();
  }

  /** Records a response that has ended (its 'close' event): metrics, then the log line. */
  end(res: ObservedResponse): void {
    const ms = performance.now() - res.startedAt;
    const method = res.req.method ?? '-';
    const done = res.sent;
    const status = done ? res.statusCode : CLOSED_EARLY;
    this.metrics.count(res.routeSlot, method, status, ms / 1000);
    if (this.log === undefined) return;
    this.log.record({
      method,
      target: res.req.url ?? '',
      status,
      ms,
      bytes: done ? bodyBytes(res, method) : 0,
      id: res.requestId,
    });
  }

  /**
   * Records an error answered by the HTTP parser before a request existed
   * (400, 408, 431) and returns the request id its raw response carries.
   */
  raw(status: number, bytes: number): string {
    const id = this.newId();
    this.metrics.count(-1, undefined, status, undefined);
    this.log?.record({ method: '-', target: '-', status, ms: 0, bytes, id });
    return id;
  }
}

/** Body bytes sent: the declared Content-Length (every users-server response declares one), none for HEAD. */
function bodyBytes(res: ObservedResponse, method: string): number {
  if (method === 'HEAD') return 0;
  if (res.listedLength >= 0) return res.listedLength;
  const length = res.getHeader('content-length');
  return typeof length === 'number' ? length : length === undefined ? 0 : Number(length) || 0;
}
