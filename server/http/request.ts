import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { problems } from '../../shared/problems.js';
import { HttpError } from '../errors.js';

/**
 * Reading a request: its body (the careful way), JSON and form bodies, and
 * header fields.
 */

function tooLarge(limit: number): HttpError {
  // The rest of the body is not read: close the connection after answering.
  return new HttpError(problems.payloadTooLarge, `The request body is larger than ${limit} bytes.`, { Connection: 'close' });
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
  if (declaresTooLarge(req, limit)) return Promise.reject(tooLarge(limit));
  if (req.complete && req.readableLength <= limit) return Promise.resolve((req.read() as Buffer | null) ?? NO_BODY);
  return new Promise((resolve, reject) => {
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
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    // After 'end' nothing more comes, and a late 'error' meets a settled
    // promise: the listeners stay (removing three costs more than the rest of the read).
    const onEnd = () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    const onError = () => {
      cleanup();
      reject(new HttpError(problems.badRequest, 'The request body was cut off.', { Connection: 'close' }));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}

/**
 * Parses a JSON body; malformed UTF-8 or JSON is a 400 (bad syntax), not a
 * 422. A byte order mark before the text is skipped, as RFC 8259 section
 * 8.1 allows a parser to.
 */
export function parseJson(raw: Buffer): unknown {
  if (!isUtf8(raw)) throw invalidJson();
  const start = raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf ? 3 : 0;
  try {
    return JSON.parse(raw.toString('utf8', start));
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
