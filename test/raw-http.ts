/**
 * Raw HTTP/1.1 over a TCP socket, for the hostile-input tests: bytes go out
 * exactly as given (node:http's client refuses to send malformed messages),
 * and what comes back is split into responses by a strict little parser, so
 * a malformed answer fails the test.
 */
import { connect, type Socket } from 'node:net';
import type { TestContext } from 'node:test';

export interface Answer {
  status: number;
  headers: Record<string, string | undefined>;
  text: string;
}

/**
 * Splits raw HTTP/1.1 responses: Content-Length or chunked framing; 1xx, 204
 * and 304 have no body, and nor has any answer to HEAD when `head` is set.
 * Throws on anything else, so junk fails the test.
 */
export function parseResponses(raw: string, head = false): Answer[] {
  const answers: Answer[] = [];
  let rest = raw;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    if (end === -1) throw new Error(`an incomplete response head: ${JSON.stringify(rest.slice(0, 200))}`);
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
    const match = /^HTTP\/1\.1 (\d{3})(?: |$)/.exec(statusLine!);
    if (match === null) throw new Error(`not a status line: ${JSON.stringify(statusLine)}`);
    const status = Number(match[1]);
    const headers: Record<string, string | undefined> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      if (colon <= 0) throw new Error(`not a header line: ${JSON.stringify(line)}`);
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    rest = rest.slice(end + 4);
    let text = '';
    if (status >= 200 && status !== 204 && status !== 304 && !head) {
      if (headers['transfer-encoding'] === 'chunked') {
        for (;;) {
          const lineEnd = rest.indexOf('\r\n');
          if (lineEnd === -1) throw new Error(`an incomplete chunked body: ${JSON.stringify(rest.slice(0, 200))}`);
          const size = parseInt(rest.slice(0, lineEnd), 16);
          rest = rest.slice(lineEnd + 2);
          if (size === 0) {
            rest = rest.slice(rest.indexOf('\r\n') + 2);
            break;
          }
          text += rest.slice(0, size);
          rest = rest.slice(size + 2);
        }
      } else {
        const length = Number(headers['content-length'] ?? 0);
        if (rest.length < length)
          throw new Error(`a body shorter than its Content-Length ${length}: ${JSON.stringify(rest.slice(0, 200))}`);
        text = rest.slice(0, length);
        rest = rest.slice(length);
      }
    }
    answers.push({ status, headers, text });
  }
  return answers;
}

/** A raw TCP connection that records what the server answers and when it closes. */
export class RawConnection {
  private readonly chunks: Buffer[] = [];
  private waiters: Array<() => void> = [];
  closed = false;

  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.chunks.push(chunk);
      this.wake();
    });
    socket.on('drain', () => this.wake());
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    // A reset after the server answered and closed is expected; what arrived is kept.
    socket.on('error', () => {});
  }

  /** Connects; the socket is destroyed after the test `t` when given. */
  static open(t: TestContext | undefined, base: string): Promise<RawConnection> {
    const { hostname, port } = new URL(base);
    return new Promise((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => {
        socket.off('error', reject);
        resolve(new RawConnection(socket));
      });
      socket.once('error', reject);
      t?.after(() => socket.destroy());
    });
  }

  get text(): string {
    return Buffer.concat(this.chunks).toString('latin1');
  }

  /** False when the socket is gone or its buffer is full (then `until` wakes on 'drain' too). */
  write(data: string | Buffer): boolean {
    return !this.socket.destroyed && this.socket.writable && this.socket.write(data);
  }

  /**
   * Resolves once `done()` holds, checked whenever data arrives, the buffer
   * drains or the connection closes; rejects when it closes without `done()`
   * ever holding. No time limit: a busy machine is slow, not wrong.
   */
  until(done: () => boolean, what = 'the expected answer'): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (done()) {
          this.waiters = this.waiters.filter((w) => w !== check);
          resolve();
        } else if (this.closed) {
          this.waiters = this.waiters.filter((w) => w !== check);
          reject(
            new Error(`${what}: the connection closed first; received ${JSON.stringify(this.text.slice(0, 400))}`),
          );
        }
      };
      this.waiters.push(check);
      check();
    });
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}

/**
 * Writes `bytes` (a string is sent as latin1, one byte per character), waits
 * until the server closes the connection, and parses every answer.
 */
export async function exchangeUntilClosed(
  t: TestContext | undefined,
  base: string,
  bytes: string | Buffer,
  head = false,
): Promise<Answer[]> {
  const connection = await RawConnection.open(t, base);
  try {
    connection.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes);
    await connection.until(() => connection.closed, 'the server closes the connection');
    return parseResponses(connection.text, head);
  } finally {
    connection.socket.destroy();
  }
}
