import type { IncomingMessage, ServerResponse } from 'node:http';
import { problems, problemType, PROBLEM_CONTENT_TYPE, type ProblemKind } from '../../shared/problems.js';
import { HttpError } from './http-error.js';

export const JSON_TYPE = 'application/json';

/**
 * Sends a JSON body whose serialization is already done. HEAD gets the
 * headers only. The headers go to node in one list: each is validated and
 * written once, with none of setHeader's per-header bookkeeping (the
 * hottest path of the server: every GET of a user ends here).
 */
export function sendJson(res: ServerResponse, status: number, json: string, headers?: Record<string, string>): void {
  const fields: string[] = [];
  if (headers !== undefined) for (const name in headers) fields.push(name, headers[name]!);
  fields.push('Content-Type', JSON_TYPE, 'Content-Length', String(Buffer.byteLength(json)));
  res.writeHead(status, fields);
  res.end(json);
}

/** Sends a response without a body (a 304 among them), its headers in one list like `sendJson`. */
export function sendEmpty(res: ServerResponse, status: number, headers?: Record<string, string>): void {
  const fields: string[] = [];
  if (headers !== undefined) for (const name in headers) fields.push(name, headers[name]!);
  if (status !== 204 && status !== 304) fields.push('Content-Length', '0');
  res.writeHead(status, fields);
  res.end();
}

export function problemBody(kind: ProblemKind, detail: string, extensions: Record<string, unknown> = {}): string {
  return JSON.stringify({ type: problemType(kind), title: kind.title, status: kind.status, detail, ...extensions });
}

/** Writes an HttpError as application/problem+json (RFC 9457). */
export function sendProblem(res: ServerResponse, error: HttpError): void {
  const body = problemBody(error.kind, error.detail, error.extensions);
  res.statusCode = error.status;
  for (const name in error.headers) res.setHeader(name, error.headers[name]!);
  res.setHeader('Content-Type', PROBLEM_CONTENT_TYPE);
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.setHeader('Cache-Control', 'no-store');
  res.end(body);
}

/**
 * A raw HTTP/1.1 response for errors the parser raises before there is a
 * request object; `requestId`, when given, is sent as X-Request-Id.
 */
export function rawProblemResponse(kind: ProblemKind, detail: string, requestId?: string): string {
  const body = problemBody(kind, detail);
  return (
    `HTTP/1.1 ${kind.status} ${kind.title}\r\n` +
    `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `Cache-Control: no-store\r\n${requestId === undefined ? '' : `X-Request-Id: ${requestId}\r\n`}Connection: close\r\n\r\n${body}`
  );
}

function tooLarge(limit: number): HttpError {
  // The rest of the body is not read: close the connection after answering.
  return new HttpError(problems.payloadTooLarge, `The request body is larger than ${limit} bytes.`, { Connection: 'close' });
}

/** True when the declared Content-Length already exceeds the limit. */
export function declaresTooLarge(req: IncomingMessage, limit: number): boolean {
  const length = req.headers['content-length'];
  return length !== undefined && Number(length) > limit;
}

/**
 * Reads the request body, at most `limit` bytes: the declared Content-Length
 * is checked before reading, and bytes are counted while streaming, so a
 * chunked body cannot exceed the limit either (413).
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  if (declaresTooLarge(req, limit)) return Promise.reject(tooLarge(limit));
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
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = () => {
      cleanup();
      reject(new HttpError(problems.badRequest, 'The request body was cut off.', { Connection: 'close' }));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}

/** `application/json` or any `+json` type (RFC 6839), in UTF-8. */
export function isJsonContentType(header: string | undefined): boolean {
  if (header === undefined) return false;
  const semicolon = header.indexOf(';');
  const type = (semicolon === -1 ? header : header.slice(0, semicolon)).trim().toLowerCase();
  if (type !== JSON_TYPE && !(type.startsWith('application/') && type.endsWith('+json'))) return false;
  if (semicolon === -1) return true;
  for (const parameter of header.slice(semicolon + 1).split(';')) {
    const eq = parameter.indexOf('=');
    if (eq === -1) continue;
    if (parameter.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    const charset = parameter.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1').toLowerCase();
    if (charset !== 'utf-8' && charset !== 'utf8') return false;
  }
  return true;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Parses a JSON body; malformed UTF-8 or JSON is a 400 (bad syntax), not a 422. */
export function parseJson(raw: Buffer): unknown {
  try {
    return JSON.parse(utf8.decode(raw));
  } catch {
    throw new HttpError(problems.invalidJson, 'The request body is not valid JSON.');
  }
}

// RFC 9110 section 8.8.3: entity-tag = [ weak ] opaque-tag; weak = %s"W/"
const ENTITY_TAG = /(W\/)?"[\x21\x23-\x7e\x80-\xff]*"/g;

/**
 * Evaluates an If-Match / If-None-Match field value against the current tag.
 * `weak` selects weak comparison (If-None-Match, RFC 9110 section 13.1.2),
 * otherwise strong comparison (If-Match, section 13.1.1).
 */
export function etagMatches(field: string, etag: string | undefined, weak: boolean): boolean {
  if (etag === undefined) return false;
  if (field.trim() === '*') return true;
  for (const match of field.matchAll(ENTITY_TAG)) {
    const isWeak = match[1] !== undefined;
    if (isWeak && !weak) continue;
    if ((isWeak ? match[0].slice(2) : match[0]) === etag) return true;
  }
  return false;
}

/** True when a Prefer field (RFC 7240) asks for return=minimal. */
export function prefersMinimal(field: string | undefined): boolean {
  if (field === undefined) return false;
  for (const preference of field.split(',')) {
    const [token] = preference.split(';');
    if (token!.trim().toLowerCase().replaceAll(' ', '') === 'return=minimal') return true;
  }
  return false;
}

/** One header as a string: repeated fields joined with ", " as RFC 9110 section 5.3 allows. */
export function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}
