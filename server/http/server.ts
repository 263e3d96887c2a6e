import {
  createServer,
  maxHeaderSize,
  type IncomingMessage,
  type Server,
  type ServerOptions as HttpServerOptions,
  type ServerResponse,
} from 'node:http';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:https';
import type { Socket } from 'node:net';
import { problems, type ProblemKind } from '../../shared/problems.js';
import type { AccessLog } from '../ops/access-log.js';
import { MAX_FIELD_LINES, type App } from './app.js';
import { ObservedResponse, Observer, type Stopping } from './observe.js';
import { Pipeline, PIPELINE_LIMIT, stopParsing } from './pipelining.js';
import { connectionLimits, defaultTotalConnections } from './connection-limits.js';
import { declaresTooLarge } from './request.js';
import { problemBody, rawProblemResponse } from './response.js';

/** API.md "Access control and limits": TLS handshake 10 s, headers 10 s, whole request 30 s, idle keep-alive 5 s. */
export const TIMEOUTS = {
  handshake: 10_000,
  headers: 10_000,
  request: 30_000,
  keepAlive: 5_000,
  connectionsCheck: 2_000,
  unread: 15_000,
};
const STOP_GRACE_MS = 10_000;
const DRAIN_MS = 1_000;

interface ListenOptions {
  host: string;
  /** 0: any free port. */
  port: number;
  /** `--max-body`: an `Expect: 100-continue` request declaring more is refused before it sends its body. */
  maxBody: number;
  /** Undefined with `--log-format off`. */
  accessLog: AccessLog | undefined;
  /** Tests only: shorter timeouts than API.md's, so a timeout test takes a second, not half a minute. */
  timeouts?: Partial<typeof TIMEOUTS>;
  /** `--max-connections-per-client`; 0 or absent: no limit. */
  maxConnectionsPerClient?: number;
  /**
   * `--max-connections`: open connections at most, shedding the heaviest address's newest past it; absent: from the
   * open-files limit.
   */
  maxConnections?: number;
  /** `--tls-cert` and `--tls-key`: serve HTTPS (node:https) with this certificate chain and key, PEM. */
  tls?: { cert: Buffer; key: Buffer };
}

export interface Listening {
  /** `http://HOST:PORT`, with the real port. */
  readonly url: string;
  readonly server: Server<typeof IncomingMessage, typeof ObservedResponse>;
  /** Graceful: refuse new connections, let in-flight requests finish and their log lines be written. */
  close(): Promise<void>;
  /** During a close: cut the connections still open now instead of after the grace period. */
  hurry(): void;
  /** HTTPS only: new connections use this certificate and key (SIGHUP); ones open keep theirs. */
  replaceCertificate(tls: { cert: Buffer; key: Buffer }): void;
}

/**
 * Serves `app` over node:http: the timeouts, the order of pipelined
 * requests, the parser's errors as problem documents, observation (request
 * id, metrics, access log) and a graceful close.
 */
export async function listen(app: App, options: ListenOptions): Promise<Listening> {
  const observer = new Observer(app.metrics, options.accessLog);
  const timeouts = { ...TIMEOUTS, ...options.timeouts };
  const server = newServer(options, timeouts);
  const serving = new Serving(app, observer, timeouts.unread);
  server.on('request', serving.handle);
  server.on('timeout', serving.onTimeout);
  // Expect: 100-continue (RFC 9110 section 10.1.1): refuse an oversized body
  // before the client sends it.
  server.on('checkContinue', (req: IncomingMessage, res: ObservedResponse) => {
    if (!declaresTooLarge(req, options.maxBody)) res.writeContinue();
    serving.handle(req, res);
  });
  // Any other expectation: RFC 9110 section 10.1.1 lets a server ignore
  // it, so it is served like any request (node would answer a bare 417).
  server.on('checkExpectation', serving.handle);
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) =>
    answerClientError(error, socket, observer),
  );
  server.on('connect', (_req: IncomingMessage, socket: Socket) => refuseConnect(socket, observer));
  server.on(
    'connection',
    connectionLimits({
      total: options.maxConnections ?? defaultTotalConnections(),
      perClient: options.maxConnectionsPerClient ?? 0,
    }),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  let closed: Promise<void> | undefined;
  return {
    url: `${options.tls === undefined ? 'http' : 'https'}://${host}:${port}`,
    server,
    close: () => (closed ??= serving.close(server)),
    hurry: () => serving.hurry(server),
    replaceCertificate: (tls) => (server as unknown as TlsServer).setSecureContext(tls),
  };
}

function newServer(
  options: ListenOptions,
  timeouts: typeof TIMEOUTS,
): Server<typeof IncomingMessage, typeof ObservedResponse> {
  // Responses are ObservedResponses: the observer keeps its per-request
  // figures in their fields instead of in closures.
  const settings = {
    headersTimeout: timeouts.headers,
    requestTimeout: timeouts.request,
    keepAliveTimeout: timeouts.keepAlive,
    connectionsCheckingInterval: timeouts.connectionsCheck,
    ServerResponse: ObservedResponse,
    // The app checks Host itself, to answer with a problem document.
    requireHostHeader: false,
  };
  // server.timeout stays 0: a timeout on every connection is refreshed at
  // each read and write, about 2% of a GET's CPU. A connection gets the
  // unread timeout only while an answer waits unsent on it (ObservedResponse.end).
  const server =
    options.tls === undefined
      ? createServer<typeof IncomingMessage, typeof ObservedResponse>(settings)
      : newTlsServer(settings, options.tls, timeouts.handshake);
  // node collects no header lines past this count: the app refuses a
  // request that reaches it, instead of serving what is left (app.ts).
  server.maxHeadersCount = MAX_FIELD_LINES + 1;
  return server;
}

/**
 * node:https's server is node:http's over TLS: the same events, timeouts
 * and responses, and a handshake that must end within `handshake` ms.
 */
function newTlsServer(
  settings: HttpServerOptions<typeof IncomingMessage, typeof ObservedResponse>,
  tls: { cert: Buffer; key: Buffer },
  handshake: number,
): Server<typeof IncomingMessage, typeof ObservedResponse> {
  const server = createTlsServer<typeof IncomingMessage, typeof ObservedResponse>({
    ...settings,
    handshakeTimeout: handshake,
    cert: tls.cert,
    key: tls.key,
  });
  // 'tlsClientError' comes only before the handshake has ended (a timeout,
  // bytes that are no handshake, a hang-up). Nothing can be sent on such a
  // connection: node passes the error on as 'clientError', whose plaintext
  // 400 would wait for the handshake forever and hold the connection open.
  // So it is destroyed first, and answerClientError finds it so.
  server.prependListener('tlsClientError', (_error: Error, socket: Socket) => socket.destroy());
  return server as unknown as Server<typeof IncomingMessage, typeof ObservedResponse>;
}

const PIPELINE = Symbol('users-server.pipeline');
type PipelinedSocket = Socket & { [PIPELINE]?: Pipeline };

/** The requests under way: each is observed, and a close waits for them. */
class Serving implements Stopping {
  /**
   * Set by close. Responses whose head is not written yet then close their
   * connection (ObservedResponse.writeHead): node keeps a connection whose
   * response ends after server.close() open until its keep-alive timeout.
   */
  stopping = false;
  /**
   * Responses under way: a close waits for them. A count, not a list: each answer writes its head knowing of the stop.
   */
  private open = 0;
  /** Set by close: called once the last response in flight has ended. */
  private drained: (() => void) | undefined;

  constructor(
    private readonly app: App,
    private readonly observer: Observer,
    /** ms: a connection with an answer waiting unsent, on which nothing moves for this long, is closed. */
    private readonly unread: number,
  ) {}

  /** Each response's onClose: one function for all of them. */
  private readonly ended = (res: ObservedResponse): void => {
    if (res.pipeline !== undefined) res.pipeline.open--;
    this.open--;
    this.observer.end(res);
    if (this.drained !== undefined && this.open === 0) this.drained();
  };

  readonly handle = (req: IncomingMessage, res: ObservedResponse): void => {
    if (!this.admitPipelined(req, res)) return;
    this.serve(req, res);
  };

  /**
   * A connection's timeout (node's keep-alive timeout, or the unread one):
   * with this listener node closes nothing itself. Closed when it is idle
   * (no request on it) or an answer waits unsent (a client that does not
   * read); left open while the server is still working on a request.
   */
  readonly onTimeout = (socket: Socket): void => {
    const busy = ((socket as PipelinedSocket)[PIPELINE]?.open ?? 0) > 0;
    if (!busy || socket.writableLength > 0) socket.destroy();
  };

  /**
   * Counts the request on its connection: false for one past
   * PIPELINE_LIMIT, which closes the connection at once (and node stops
   * parsing what it read from it: stopParsing).
   */
  private admitPipelined(req: IncomingMessage, res: ObservedResponse): boolean {
    const socket = req.socket as PipelinedSocket;
    // On the socket itself: a property every connection gets the same way
    // is a cheaper lookup, on every request, than a WeakMap.
    const pipeline = (socket[PIPELINE] ??= new Pipeline());
    if (pipeline.over) return false;
    if (pipeline.open >= PIPELINE_LIMIT) {
      pipeline.over = true;
      stopParsing(socket);
      socket.destroy();
      return false;
    }
    pipeline.open++;
    res.pipeline = pipeline;
    return true;
  }

  private serve(req: IncomingMessage, res: ObservedResponse): void {
    // RFC 9112 section 9.3.2: pipelined requests are served in order. node
    // emits each as soon as it is parsed, and gives a response its socket
    // only once the one before it has finished: wait for that, so a GET
    // after a PUT sees the PUT.
    // A connection answers a few in a row, then lets the others have a turn.
    if (res.socket === null) {
      res.once('socket', () =>
        res.pipeline?.yieldsTurn() === true ? setImmediate(() => this.serve(req, res)) : this.serve(req, res),
      );
      return;
    }
    // Parsed behind an answer that closes the connection (a 413, say): it
    // could never be answered, so it is not served either.
    if (!res.socket.writable) return;
    this.observer.begin(req, res);
    res.unreadTimeout = this.unread;
    res.server = this;
    this.open++;
    res.onClose = this.ended;
    this.app.handle(req, res);
  }

  /** Cuts every connection at once; responses under way end without being sent. */
  hurry(server: Server<typeof IncomingMessage, typeof ObservedResponse>): void {
    if (!this.stopping) return;
    server.closeAllConnections();
    this.drained?.();
  }

  async close(server: Server<typeof IncomingMessage, typeof ObservedResponse>): Promise<void> {
    this.stopping = true;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const grace = setTimeout(() => server.closeAllConnections(), STOP_GRACE_MS);
    await closed;
    clearTimeout(grace);
    // The server closes when its sockets are destroyed; their responses'
    // 'close' events, which write the last log lines, may come just after.
    // (Bounded, so a response that never reports cannot hold the stop.)
    if (this.open === 0) return;
    let bound: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.drained = resolve;
      bound = setTimeout(resolve, DRAIN_MS);
    });
    clearTimeout(bound);
  }
}

/**
 * True when `packet` starts a request whose request line alone passes
 * node's header limit (a read that starts elsewhere, a header trickled in
 * small pieces say, is taken as the fields' overflow).
 */
function requestLineTooLong(packet: unknown): boolean {
  if (!Buffer.isBuffer(packet) || !REQUEST_START.test(packet.toString('latin1', 0, 64))) return false;
  const end = packet.indexOf(0x0a);
  return end < 0 || end >= maxHeaderSize;
}

// A method, a space and the start of a target: a path, an absolute URI or *.
const REQUEST_START = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,32} (?:\/|[A-Za-z][A-Za-z0-9+.-]*:|\*)/;

/**
 * True when `packet` starts with a whole request line, `METHOD target HTTP/d.d` (not a TLS handshake or other bytes).
 */
function startsWithRequestLine(packet: unknown): boolean {
  if (!Buffer.isBuffer(packet)) return false;
  return REQUEST_LINE.test(packet.toString('latin1', 0, Math.min(packet.length, 8192)));
}

// RFC 9112 section 3: method (a token) SP request-target SP HTTP-version CRLF.
const REQUEST_LINE = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,32} [^ \r\n]+ HTTP\/\d\.\d\r?\n/;

/**
 * Errors node:http's parser raises before a request exists (malformed
 * request line or headers, oversized headers, timeouts) answered as
 * problem documents instead of node's bare responses, with a request id,
 * and logged and counted like requests.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Socket, observer: Observer): void {
  if (!socket.writable || error.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  // RFC 9112 section 9.3.2: answers go out in the order of the requests. A
  // whole request before the bad one may still be waiting for its store (a
  // database): its answer first, then this one. (A response whose request
  // is not whole is the one this error is about: a timeout.)
  const earlier = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (earlier !== null && earlier !== undefined && !earlier.writableFinished && earlier.req.complete) {
    earlier.once('close', () => answerClientError(error, socket, observer));
    return;
  }
  let kind: ProblemKind;
  let detail: string;
  if (error.code === 'HPE_HEADER_OVERFLOW' && requestLineTooLong((error as { rawPacket?: unknown }).rawPacket)) {
    // The request line alone passed the limit: its target is what is too long (RFC 9110 section 15.5.15).
    [kind, detail] = [
      problems.uriTooLong,
      'The request target is too long (the request line and headers are limited to 16 KiB together).',
    ];
  } else if (error.code === 'HPE_HEADER_OVERFLOW')
    [kind, detail] = [problems.requestHeaderFieldsTooLarge, 'The request headers are too large.'];
  else if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT')
    [kind, detail] = [problems.requestTimeout, 'The request took too long to arrive.'];
  else if (error.code === 'HPE_INVALID_METHOD' && startsWithRequestLine((error as { rawPacket?: unknown }).rawPacket)) {
    // RFC 9110 section 9.1: a method the server does not recognize is 501 (405 is for one it knows).
    [kind, detail] = [
      problems.notImplemented,
      'This server does not implement that method (methods are case-sensitive: GET, HEAD, PUT, PATCH, POST, DELETE, OPTIONS).',
    ];
  } else [kind, detail] = [problems.badRequest, 'The request is not valid HTTP/1.1.'];
  const id = observer.raw(kind.status, Buffer.byteLength(problemBody(kind, detail)));
  socket.end(rawProblemResponse(kind, detail, id));
}

/**
 * node hands a CONNECT's socket to the 'connect' event and, with no
 * listener, destroys it unanswered. Its authority-form target is not one
 * this server routes (docs/api.md "Routing and request targets"): 400.
 */
function refuseConnect(socket: Socket, observer: Observer): void {
  // node has removed its own error handler from this socket.
  socket.on('error', () => socket.destroy());
  const detail = 'CONNECT is not served: the request target must be a path or an absolute http URI.';
  socket.end(
    rawProblemResponse(
      problems.badRequest,
      detail,
      observer.raw(400, Buffer.byteLength(problemBody(problems.badRequest, detail))),
    ),
  );
}
