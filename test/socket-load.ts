/**
 * A lean HTTP/1.1 load generator on raw sockets, for loads where the
 * generator shares the servers' cores (bench/postgres-bench.ts): every
 * microsecond it spends is taken from the servers it measures.
 *
 * Like autocannon, each keep-alive connection has one request in flight and
 * sends the next when the answer is complete; the requests' bytes are built
 * once. Unlike autocannon it keeps no latency histogram and parses only what
 * it needs: the status code and Content-Length. An answer without
 * Content-Length (chunked) or one that is not HTTP/1.1 ends the run with an
 * error, since the loads here never get one.
 */
import { connect, type Socket } from 'node:net';

/** One request of a load, as autocannon's `requests` take them (the benchmarks give the same list to both). */
export interface LoadRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  setupRequest?: (request: LoadRequest, context: object) => LoadRequest;
}

interface SocketLoadOptions {
  url: string;
  connections: number;
  seconds: number;
  requests: readonly LoadRequest[];
}

interface SocketLoadResult {
  /** Answers completed per second over the run. */
  rps: number;
  requests: number;
  /** Sockets that failed or closed under the load. */
  errors: number;
  /** Answers whose status was not 2xx. */
  non2xx: number;
  statuses: Record<number, number>;
}

const HEAD_END = Buffer.from('\r\n\r\n');
const CONTENT_LENGTH = /\r\ncontent-length:[ \t]*(\d+)/i;

/** The bytes of one request, built once. */
function requestBytes(host: string, request: LoadRequest): Buffer {
  const body = request.body === undefined ? undefined : Buffer.from(request.body);
  const lines = [`${request.method ?? 'GET'} ${request.path ?? '/'} HTTP/1.1`, `host: ${host}`];
  for (const [name, value] of Object.entries(request.headers ?? {})) lines.push(`${name}: ${value}`);
  if (body !== undefined) lines.push(`content-length: ${body.length}`);
  const head = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
  return body === undefined ? head : Buffer.concat([head, body]);
}

/**
 * Splits a stream of HTTP/1.1 answers into statuses. `push` takes the next
 * bytes and returns how many answers they completed; `statuses` counts them.
 */
export class AnswerReader {
  readonly statuses: Record<number, number> = {};
  non2xx = 0;
  private pending: Buffer | undefined;
  /** The status of the answer being read, and its body bytes still to skip; -1 while its head is incomplete. */
  private status = 0;
  private bodyLeft = -1;

  push(chunk: Buffer): number {
    let data = this.pending === undefined ? chunk : Buffer.concat([this.pending, chunk]);
    this.pending = undefined;
    let done = 0;
    for (;;) {
      if (this.bodyLeft >= 0) {
        if (data.length < this.bodyLeft) {
          this.bodyLeft -= data.length;
          return done;
        }
        data = data.subarray(this.bodyLeft);
        this.bodyLeft = -1;
        this.count(this.status);
        done++;
      }
      if (data.length === 0) return done;
      const end = data.indexOf(HEAD_END);
      if (end < 0) {
        this.pending = data;
        return done;
      }
      this.readHead(data.toString('latin1', 0, end + 2));
      data = data.subarray(end + 4);
    }
  }

  /** Takes the head's status and its body's length. */
  private readHead(head: string): void {
    if (!head.startsWith('HTTP/1.1 ')) throw new Error(`not an HTTP/1.1 answer: ${JSON.stringify(head.slice(0, 40))}`);
    this.status = Number(head.slice(9, 12));
    if (this.status === 204 || this.status === 304) {
      this.bodyLeft = 0;
      return;
    }
    const length = CONTENT_LENGTH.exec(head);
    if (length === null) throw new Error(`an answer ${this.status} without Content-Length`);
    this.bodyLeft = Number(length[1]);
  }

  private count(status: number): void {
    this.statuses[status] = (this.statuses[status] ?? 0) + 1;
    if (status < 200 || status > 299) this.non2xx++;
  }
}

/** Loads `url` with `connections` keep-alive connections for `seconds`, cycling through `requests`. */
export async function socketLoad(options: SocketLoadOptions): Promise<SocketLoadResult> {
  const url = new URL(options.url);
  const pool = options.requests.map((r) => requestBytes(url.host, r));
  const readers: AnswerReader[] = [];
  const sockets = new Set<Socket>();
  let completed = 0;
  let errors = 0;
  let running = true;
  let failure: Error | undefined;

  const open = (offset: number): void => {
    const reader = new AnswerReader();
    readers.push(reader);
    let next = offset;
    const socket = connect({ host: url.hostname, port: Number(url.port), noDelay: true });
    sockets.add(socket);
    const send = () => {
      socket.write(pool[next]!);
      next = next + 1 === pool.length ? 0 : next + 1;
    };
    let connected = false;
    socket.on('connect', () => {
      connected = true;
      send();
    });
    socket.on('data', (chunk: Buffer) => {
      let answered: number;
      try {
        answered = reader.push(chunk);
      } catch (error) {
        failure ??= error as Error;
        running = false;
        socket.destroy();
        return;
      }
      if (answered === 0 || !running) return;
      completed += answered;
      send();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      sockets.delete(socket);
      if (!running) return;
      errors++;
      // A connection the server closed is opened again; one it refused is not, or the load would spin.
      if (connected) open(next);
    });
  };

  const started = performance.now();
  for (let i = 0; i < options.connections; i++) open(Math.floor((i * pool.length) / options.connections));
  await new Promise<void>((done) => setTimeout(done, options.seconds * 1000));
  running = false;
  const seconds = (performance.now() - started) / 1000;
  for (const socket of sockets) socket.destroy();
  if (failure !== undefined) throw failure;
  const statuses: Record<number, number> = {};
  let non2xx = 0;
  for (const reader of readers) {
    non2xx += reader.non2xx;
    for (const [status, count] of Object.entries(reader.statuses))
      statuses[Number(status)] = (statuses[Number(status)] ?? 0) + count;
  }
  return { rps: completed / seconds, requests: completed, errors, non2xx, statuses };
}
