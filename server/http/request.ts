/**
 * Reading a request: its body (the careful way), JSON and form bodies, and
 * header fields.
 */
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { problems } from '../../shared/problems.js';
import { HttpError } from '../errors.js';

function tooLarge(limit: number): HttpError {
  // The rest of the body is not read: close the connection after answering.
  return new HttpError(problems.payloadTooLarge, `The request body is larger than ${limit} bytes.`, {
    Connection: 'close',
  });
}

/** True when the declared Content-Length already exceeds the limit. */
export function declaresTooLarge(req: IncomingMessage, limit: number): boolean {
  const length = req.headers['content-length'];
  return length !== undefined && Number(length) > limit;
}

const NO_BODY = Buffer.alloc(0);

/**
 * Reads the request body, at most `limit` bytes: the declared Content-Length
 * is checked before reading, and bytes are counted while streaming, so a
 * chunked body cannot exceed the limit either (413). A body that has
 * arrived whole by the time it is read is taken at once from the stream's
 * buffer, without listening for its events. (node parses a body only after
 * the `request` event's ticks and microtasks have run, so this happens
 * when a route waited on something else first, a database say.)
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return readBodyAs(req, limit, (raw) => raw);
}

/** `readBody` whose promise is fulfilled with `finish(body)`, or rejected with what it throws. */
function readBodyAs<T>(req: IncomingMessage, limit: number, finish: (raw: Buffer) => T): Promise<T> {
  return new Promise((resolve, reject) => readBodyThen(req, limit, finish, resolve, reject));
}

/**
 * `readBodyAs` without its promise, for the PUT route, which has one
 * promise of its own: `done(finish(body))` once the body is read, or
 * `failed` with what the read or `finish` threw: one of them, once (at
 * once when the body has already arrived).
 */
export function readBodyThen<T>(
  req: IncomingMessage,
  limit: number,
  finish: (raw: Buffer) => T,
  done: (value: T) => void,
  failed: (error: unknown) => void,
): void {
  const coding = req.headers['content-encoding'];
  if (coding !== undefined && !isIdentity(coding)) return failed(codedBody(coding));
  if (declaresTooLarge(req, limit)) return failed(tooLarge(limit));
  if (req.complete && req.readableLength <= limit)
    return finishWith(finish, (req.read() as Buffer | null) ?? NO_BODY, done, failed);
  const chunks: Buffer[] = [];
  let size = 0;
  const cleanup = () => {
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('error', onError);
  };
  const onData = (chunk: Buffer) => {
    size += chunk.length;
    if (size > limit) {
      cleanup();
      failed(tooLarge(limit));
      return;
    }
    chunks.push(chunk);
  };
  // After 'end' nothing more comes, and a late 'error' finds `failed`
  // already past: the listeners stay (removing three costs more than the
  // rest of the read), and what `done` throws is not called `failed` for.
  let ended = false;
  const onEnd = () => {
    ended = true;
    finishWith(finish, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size), done, failed);
  };
  const onError = () => {
    cleanup();
    if (!ended) failed(new HttpError(problems.badRequest, 'The request body was cut off.', { Connection: 'close' }));
  };
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('error', onError);
}

/** True for a Content-Encoding that names no coding but `identity`. */
function isIdentity(field: string): boolean {
  return field.split(',').every((coding) => {
    const name = coding.trim().toLowerCase();
    return name === '' || name === 'identity';
  });
}

/**
 * A body in a content coding (gzip, say), which this server does not
 * decode: 415, naming the codings it takes (RFC 9110 section 15.5.16).
 */
function codedBody(coding: string): HttpError {
  return new HttpError(
    problems.unsupportedMediaType,
    `This server reads request bodies as they are; this one came with Content-Encoding: ${coding.slice(0, 64)}. Send it without a content coding.`,
    { 'Accept-Encoding': 'identity' },
  );
}

function finishWith<T>(
  finish: (raw: Buffer) => T,
  raw: Buffer,
  done: (value: T) => void,
  failed: (error: unknown) => void,
): void {
  let value: T;
  try {
    value = finish(raw);
  } catch (error) {
    return failed(error);
  }
  done(value);
}

/**
 * Parses a JSON body; malformed UTF-8 or JSON is a 400 (bad syntax), not a
 * 422. A byte order mark before the text is skipped, as RFC 8259 section
 * 8.1 allows a parser to.
 */
export function parseJson(raw: Buffer): unknown {
  return parseJsonText(jsonText(raw));
}

/** A JSON body's bytes as text; 400 invalid-json when they are not UTF-8. */
export function jsonText(raw: Buffer): string {
  if (!isUtf8(raw)) throw invalidJson();
  return raw.toString('utf8');
}

/** Parses a JSON body's text (`jsonText`), a byte order mark before it skipped. */
export function parseJsonText(text: string): unknown {
  try {
    return JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch {
    throw invalidJson();
  }
}

function invalidJson(): HttpError {
  return new HttpError(problems.invalidJson, 'The request body is not valid JSON.');
}

const utf8 = new TextDecoder('utf-8');

/** The fields of an urlencoded body, read as UTF-8 (the page's encoding); the first of repeated names wins. */
export function parseForm(raw: Buffer): URLSearchParams {
  return new URLSearchParams(utf8.decode(raw));
}

/** One header as a string: repeated fields joined with ", " as RFC 9110 section 5.3 allows. */
export function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/** The `return` preference of a Prefer field (RFC 7240 section 4.2), when it asks for one this server knows. */
export function preferredReturn(field: string | undefined): 'minimal' | 'representation' | undefined {
  if (field === undefined) return undefined;
  for (const preference of field.split(',')) {
    const [token] = preference.split(';');
    const asked = token!.trim().toLowerCase().replaceAll(' ', '');
    if (asked === 'return=minimal') return 'minimal';
    if (asked === 'return=representation') return 'representation';
  }
  return undefined;
}
