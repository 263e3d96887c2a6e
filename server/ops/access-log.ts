/**
 * The access log: one line per answered request, on stdout by default.
 * Lines are collected and handed to the sink once per turn of the event
 * loop (or as soon as 64 KiB are waiting), so a busy server makes one
 * write for many requests instead of one each. Formats and fields:
 * docs/operations.md, "Logs".
 */
import { performance } from 'node:perf_hooks';

/** Receives one or more complete lines, each ending in "\n". */
export type LogSink = (chunk: string) => void;

/** One answered request, as the log shows it. */
interface AccessEntry {
  method: string;
  /** The request target as received: path and query. */
  target: string;
  status: number;
  /** Milliseconds from the request's headers to the end of its response. */
  ms: number;
  /** Body bytes sent. */
  bytes: number;
  id: string;
}

/** Pending lines are handed over early once they reach this size. */
export const FLUSH_BYTES = 64 * 1024;
/** Longest request target logged, in characters of the target as received. */
export const MAX_TARGET = 2048;

export class AccessLog {
  private pending = '';
  private scheduled = false;
  /** The last millisecond formatted, and its ISO string: requests ending in the same millisecond share it. */
  private lastMs = -1;
  private lastTime = '';
  /** The last second formatted, and its ISO string up to the seconds' dot ("2026-11-27T19:40:12."). */
  private lastSecond = -1;
  private secondPrefix = '';

  constructor(
    readonly format: 'text' | 'json',
    private readonly sink: LogSink,
    /** Milliseconds since the epoch; by default a cheap wall clock (see `wallClock`). */
    private readonly clock: () => number = wallClock,
  ) {
    this.flush = this.flush.bind(this);
  }

  record(entry: AccessEntry): void {
    this.pending += this.format === 'json' ? this.jsonLine(entry) : this.textLine(entry);
    if (this.pending.length >= FLUSH_BYTES) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.flush);
    }
  }

  /** Hands every pending line to the sink now. */
  flush(): void {
    this.scheduled = false;
    if (this.pending === '') return;
    const chunk = this.pending;
    this.pending = '';
    this.sink(chunk);
  }

  /**
   * The time as toISOString writes it. Its date and seconds are formatted
   * once a second and the milliseconds appended: toISOString formats with
   * the C library's printf, about 4,700 instructions, which a server
   * answering fewer than a thousand requests a second paid on nearly every line.
   */
  private time(): string {
    const ms = Math.floor(this.clock());
    if (ms !== this.lastMs) {
      this.lastMs = ms;
      const milli = ((ms % 1000) + 1000) % 1000;
      const second = ms - milli;
      if (second !== this.lastSecond) {
        this.lastSecond = second;
        this.secondPrefix = new Date(second).toISOString().slice(0, -4);
      }
      this.lastTime = `${this.secondPrefix}${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}Z`;
    }
    return this.lastTime;
  }

  private textLine(e: AccessEntry): string {
    return `${this.time()} ${e.method} ${escapeTarget(e.target)} ${e.status} ${milliseconds(e.ms)}ms ${e.bytes}B req=${e.id}\n`;
  }

  private jsonLine(e: AccessEntry): string {
    // Every value is a number, or a string with no character JSON must escape
    // (the target is escaped first; methods and ids are tokens).
    return `{"time":"${this.time()}","method":"${e.method}","path":"${escapeTarget(e.target, true)}","status":${e.status},"ms":${milliseconds(e.ms)},"bytes":${e.bytes},"id":"${e.id}"}\n`;
  }
}

/** Milliseconds with two decimals, without toFixed (several times slower). */
function milliseconds(ms: number): string {
  const hundredths = Math.round(ms * 100);
  const fraction = hundredths % 100;
  return `${(hundredths - fraction) / 100}.${fraction < 10 ? '0' : ''}${fraction}`;
}

let clockOffset = Date.now() - performance.now();
let offsetCheckedAt = performance.now();

/**
 * Milliseconds since the epoch from the monotonic clock plus an offset to
 * the wall clock that is re-read once a second: Date.now() costs more than
 * performance.now() here, and a step of the wall clock shows up within a second.
 */
function wallClock(): number {
  const now = performance.now();
  if (now - offsetCheckedAt >= 1000) {
    offsetCheckedAt = now;
    clockOffset = Date.now() - now;
  }
  return now + clockOffset;
}

/**
 * The request target made safe for one log line: at most MAX_TARGET
 * characters (then "..."), and every character outside printable ASCII, the
 * space, `"` and `\` written as `\xNN`. node:http reads the target as latin1,
 * so each character is one byte received and `\xNN` is that byte (`\uNNNN`
 * covers a target that did not come from the parser). With `json`, the
 * result is ready to sit between the quotes of a JSON string.
 */
export function escapeTarget(target: string, json = false): string {
  const cut = target.length > MAX_TARGET;
  const text = cut ? target.slice(0, MAX_TARGET) : target;
  let plain = true;
  for (let i = 0; i < text.length; i++) {
    if (needsEscape(text.charCodeAt(i))) {
      plain = false;
      break;
    }
  }
  if (plain) return cut ? text + '...' : text;
  // Inside a JSON string the backslash itself is escaped, so the value parses to `\xNN`.
  const slash = json ? '\\\\' : '\\';
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (!needsEscape(c)) out += text[i];
    else if (c <= 0xff) out += slash + 'x' + c.toString(16).toUpperCase().padStart(2, '0');
    else out += slash + 'u' + c.toString(16).toUpperCase().padStart(4, '0');
  }
  return cut ? out + '...' : out;
}

function needsEscape(c: number): boolean {
  return c <= 0x20 || c >= 0x7f || c === 0x22 || c === 0x5c;
}
