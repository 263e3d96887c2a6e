/**
 * Reading input and writing output for usersctl: stdout with backpressure
 * and a quiet stop when its reader goes away (`usersctl list | head`), line
 * readers that keep each line's exact bytes, and the no-echo password prompt.
 */
import { StringDecoder } from 'node:string_decoder';
import { CliError, EXIT, CliUsageError, type ExitCode, type StopExitCode } from './exit-codes.js';
import { writeFailure } from '../shared/file-errors.js';
import { pipeReaderCheck } from './pipe-reader.js';

/** How often `Output.noticeReaderGone` asks: a reader gone is seen within half a second. */
const READER_CHECK_MS = 500;

interface Writable {
  write(chunk: string): unknown;
  isTTY?: boolean;
}

interface EventfulWritable extends Writable {
  once(event: string, listener: (...args: unknown[]) => void): unknown;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  off(event: string, listener: (...args: unknown[]) => void): unknown;
}

function isEventful(stream: Writable): stream is EventfulWritable {
  const s = stream as Partial<EventfulWritable>;
  return typeof s.once === 'function' && typeof s.on === 'function' && typeof s.off === 'function';
}

/**
 * stdout for data: waits for 'drain', stops quietly once the reader has
 * closed the pipe, and stops with the cause when a write fails (a full
 * disk under `> file`).
 */
export class Output {
  /** True once the reader is gone (EPIPE, or seen gone by `noticeReaderGone`): commands stop producing. */
  closed = false;
  /** Why a write failed, as words (`no space left on the device`); commands stop producing. */
  failure: string | undefined;
  private readerChecks: NodeJS.Timeout | undefined;
  private readonly onError = (error: unknown) => {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EPIPE') this.closed = true;
    else this.failure ??= writeFailure(code);
  };

  constructor(private readonly stream: Writable) {
    if (isEventful(stream)) stream.on('error', this.onError);
  }

  /** True once nothing more can be written: the reader is gone, or a write failed. */
  get stopped(): boolean {
    return this.closed || this.failure !== undefined;
  }

  /**
   * Writes `text`, once the stream has room; when the output has `stopped` after it, it may not all have reached the
   * reader.
   */
  async write(text: string): Promise<void> {
    if (this.stopped || text === '') return;
    let flushed: unknown;
    try {
      flushed = this.stream.write(text);
    } catch (error) {
      // A file's stream writes synchronously and may throw its error here.
      this.onError(error);
      return;
    }
    if (flushed !== false || !isEventful(this.stream)) return;
    await this.settled(this.stream);
  }

  /**
   * For a command that may wait long between writes (watch): checks twice
   * a second whether the reader of a pipe on stdout has gone, and when it
   * has, stops the output and calls `gone`. Where that cannot be asked (not
   * a pipe, no WASI), a gone reader is seen at the next write.
   */
  noticeReaderGone(gone: () => void): void {
    const fd = (this.stream as { fd?: unknown }).fd;
    const readerGone = typeof fd === 'number' ? pipeReaderCheck(fd) : undefined;
    if (readerGone === undefined || this.readerChecks !== undefined) return;
    this.readerChecks = setInterval(() => {
      if (this.stopped) return this.stopReaderChecks();
      if (!readerGone()) return;
      this.closed = true;
      this.stopReaderChecks();
      gone();
    }, READER_CHECK_MS);
    // The checks never keep the process alive.
    this.readerChecks.unref();
  }

  private stopReaderChecks(): void {
    clearInterval(this.readerChecks);
    this.readerChecks = undefined;
  }

  /** Waits until `stream` drained, closed or failed. */
  private settled(stream: EventfulWritable): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        stream.off('drain', done);
        stream.off('close', done);
        stream.off('error', done);
        resolve();
      };
      stream.on('drain', done);
      stream.on('close', done);
      stream.on('error', done);
    });
  }

  dispose(): void {
    this.stopReaderChecks();
    // After EPIPE or a failed write, writes still queued may fail too: keep
    // the listener so they do not become an uncaught 'error' event.
    if (isEventful(this.stream) && !this.closed && this.failure === undefined) this.stream.off('error', this.onError);
  }
}

/** Why a streaming command stopped before its input ended. */
type StopReason = 'SIGINT' | 'SIGTERM' | 'output closed' | 'output failed';

/**
 * Exit codes of an interrupted command, as a shell reports a process ended
 * by that signal (128 + its number; SIGPIPE for a closed output); a failed
 * write is the environment failing, 1.
 */
export const STOP_EXIT: Record<StopReason, ExitCode | StopExitCode> = {
  SIGINT: 130,
  SIGTERM: 143,
  'output closed': 141,
  'output failed': EXIT.unexpected,
};

/**
 * Watches what ends a streaming command early: SIGINT, SIGTERM (only when
 * the command runs as the process, `watchSignals`), or its reader going
 * away. Commands check `reason` before each new request; a second signal
 * ends the process at once, as a second Ctrl-C does elsewhere, after the
 * one line of `onForcedStop`, if the command gave one.
 */
export class Interruption {
  private signal: 'SIGINT' | 'SIGTERM' | undefined;
  private readonly listeners: (() => void)[] = [];
  private howFar: (() => string) | undefined;
  private readonly onSignal = (signal: 'SIGINT' | 'SIGTERM') => {
    if (this.signal !== undefined) {
      // stderr is written synchronously (a file, a pipe or a terminal), so the line is out before the exit.
      if (this.howFar !== undefined) this.report(`stopped at once (${signal} again): ${this.howFar()}`);
      process.exit(STOP_EXIT[signal]);
    }
    this.signal = signal;
    for (const listener of this.listeners) listener();
  };
  private readonly onInt = () => this.onSignal('SIGINT');
  private readonly onTerm = () => this.onSignal('SIGTERM');

  constructor(
    private readonly out: Output,
    private readonly watchSignals: boolean,
    /** Writes one line on stderr. */
    private readonly report: (message: string) => void = () => {},
  ) {
    if (watchSignals) {
      process.on('SIGINT', this.onInt);
      process.on('SIGTERM', this.onTerm);
    }
  }

  get reason(): StopReason | undefined {
    return (
      this.signal ?? (this.out.failure !== undefined ? 'output failed' : this.out.closed ? 'output closed' : undefined)
    );
  }

  /** The reason as a message says it: `SIGINT`, `output closed`, `output failed: no space left on the device`. */
  get label(): string | undefined {
    const reason = this.reason;
    return reason === 'output failed' ? `${reason}: ${this.out.failure}` : reason;
  }

  /** What a second signal, which ends the process without waiting, says of how far the command got. */
  onForcedStop(howFar: () => string): void {
    this.howFar = howFar;
  }

  /** Calls `listener` when a signal arrives (to stop waiting for input). */
  onStop(listener: () => void): void {
    this.listeners.push(listener);
  }

  dispose(): void {
    if (!this.watchSignals) return;
    process.off('SIGINT', this.onInt);
    process.off('SIGTERM', this.onTerm);
  }
}

export interface Line {
  /** 1-based physical line number. */
  number: number;
  /** The line's bytes without its line ending (LF or CRLF); none when `tooLong`. */
  bytes: Buffer;
  /** The input's byte offset just after this line (and its ending). */
  end: number;
  /** Set for a line longer than MAX_INPUT_BYTES, to its length: its bytes were not kept. */
  tooLong?: number;
}

/**
 * The most bytes usersctl reads as one line or one body: users-server takes
 * no larger body (its --max-body is at most 64 MiB), and input without a
 * line ending (a binary file, /dev/zero) must not fill the memory.
 */
export const MAX_INPUT_BYTES = 64 * 1024 * 1024;

/** The refusal of an input past MAX_INPUT_BYTES: `what` names it. */
export function inputTooLong(what: string): CliUsageError {
  return new CliUsageError(`${what} is longer than 64 MiB, more than users-server takes in a body`);
}

/**
 * The lines of a byte stream, as they arrive: one chunk is held at a time,
 * so a file of any size streams in bounded memory. A last line without a
 * line ending still counts.
 */
export async function* readLines(input: AsyncIterable<Buffer | string>): AsyncGenerator<Line> {
  // A line that spans chunks is kept as its parts and joined once at its
  // end: joining at every chunk made a long line cost its length squared.
  let parts: Buffer[] = [];
  let partsLength = 0;
  /** The length so far of a line past MAX_INPUT_BYTES, whose bytes are dropped; 0 for none. */
  let skipped = 0;
  let number = 0;
  /** Input bytes before the current chunk. */
  let base = 0;
  for await (const chunk of input) {
    const data = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    let start = 0;
    for (let end = data.indexOf(0x0a); end !== -1; end = data.indexOf(0x0a, start)) {
      number++;
      const head = data.subarray(start, end);
      if (skipped > 0 || partsLength + head.length > MAX_INPUT_BYTES) {
        yield { number, bytes: NO_BYTES, end: base + end + 1, tooLong: skipped + partsLength + head.length };
        skipped = 0;
      } else {
        const bytes = partsLength === 0 ? head : Buffer.concat([...parts, head], partsLength + head.length);
        yield { number, bytes: lineBytes(bytes, number), end: base + end + 1 };
      }
      parts = [];
      partsLength = 0;
      start = end + 1;
    }
    const rest = data.length - start;
    if (skipped > 0) skipped += rest;
    else if (partsLength + rest > MAX_INPUT_BYTES) {
      skipped = partsLength + rest;
      parts = [];
      partsLength = 0;
    } else if (rest > 0) {
      // Copied: a subarray would keep the whole chunk alive.
      const tail = Buffer.from(data.subarray(start));
      parts.push(tail);
      partsLength += tail.length;
    }
    base += data.length;
  }
  if (skipped > 0) yield { number: number + 1, bytes: NO_BYTES, end: base, tooLong: skipped };
  else if (partsLength > 0)
    yield { number: number + 1, bytes: lineBytes(Buffer.concat(parts, partsLength), number + 1), end: base };
}

const NO_BYTES = Buffer.alloc(0);

/** A line's bytes without its CR, and the first without a byte order mark (however the input was cut). */
function lineBytes(bytes: Buffer, number: number): Buffer {
  return stripCr(number === 1 ? withoutBom(bytes) : bytes);
}

// A UTF-8 byte order mark, as Windows editors put at the start of a file: not part of the text.
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);

/** `bytes` without a byte order mark at its start. */
function withoutBom(bytes: Buffer): Buffer {
  return bytes.subarray(0, 3).equals(BOM) ? bytes.subarray(3) : bytes;
}

function stripCr(line: Buffer): Buffer {
  return line.length > 0 && line[line.length - 1] === 0x0d ? line.subarray(0, line.length - 1) : line;
}

/** The whole stream as UTF-8 text; `what` names it when it is longer than MAX_INPUT_BYTES. */
export async function readAll(input: AsyncIterable<Buffer | string>, what: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of input) {
    const data = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    size += data.length;
    if (size > MAX_INPUT_BYTES) throw inputTooLong(what);
    chunks.push(data);
  }
  return withoutBom(Buffer.concat(chunks, size)).toString('utf8');
}

/**
 * The first line of the stream (without its ending), or undefined when it
 * is empty. Refused as soon as it passes MAX_INPUT_BYTES (`what` names it),
 * not at its end: stdin may be a device that never ends (/dev/zero).
 */
export async function readFirstLine(input: AsyncIterable<Buffer | string>, what: string): Promise<string | undefined> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of input) {
    const data = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    const end = data.indexOf(0x0a);
    const part = end === -1 ? data : data.subarray(0, end);
    size += part.length;
    if (size > MAX_INPUT_BYTES) throw inputTooLong(what);
    parts.push(part);
    if (end !== -1) break;
  }
  return parts.length === 0 ? undefined : lineBytes(Buffer.concat(parts, size), 1).toString('utf8');
}

export interface TtyInput {
  isTTY?: boolean;
  setRawMode?(mode: boolean): unknown;
  isRaw?: boolean;
  on(event: 'data', listener: (chunk: Buffer | string) => void): unknown;
  off(event: 'data', listener: (chunk: Buffer | string) => void): unknown;
  resume(): unknown;
  pause(): unknown;
}

/**
 * Asks for a secret on a terminal without echoing it: raw mode, so the
 * terminal prints nothing, and the line is edited here (backspace, Ctrl-U).
 * Ctrl-C and Ctrl-D cancel.
 */
export function promptHidden(input: TtyInput, output: Writable, prompt: string): Promise<string> {
  if (typeof input.setRawMode !== 'function')
    return Promise.reject(new CliError('stdin is a terminal but cannot be put in raw mode', EXIT.unexpected));
  const wasRaw = input.isRaw === true;
  input.setRawMode(true);
  output.write(prompt);
  const decoder = new StringDecoder('utf8');
  return new Promise((resolve, reject) => {
    let chars: string[] = [];
    const finish = (error?: Error) => {
      input.off('data', onData);
      input.setRawMode?.(wasRaw);
      input.pause();
      output.write('\n');
      if (error) reject(error);
      else resolve(chars.join(''));
    };
    const onData = (chunk: Buffer | string) => {
      const text = typeof chunk === 'string' ? chunk : decoder.write(chunk);
      for (const ch of text) {
        if (ch === '\r' || ch === '\n') return finish();
        if (ch === '\u0003' || (ch === '\u0004' && chars.length === 0))
          return finish(new CliError('login cancelled', EXIT.unexpected));
        if (ch === '\u007f' || ch === '\b') chars.pop();
        else if (ch === '\u0015') chars = [];
        else if (ch >= ' ') chars.push(ch);
      }
    };
    input.on('data', onData);
    input.resume();
  });
}
