/**
 * Writing responses: JSON, empty answers and problem documents (RFC 9457).
 * Every header value goes to node as a string: one number (a
 * Content-Length) among them makes node's header writing slower for all
 * the answers after it.
 */
import type { ServerResponse } from 'node:http';
import { problems, problemType, PROBLEM_CONTENT_TYPE, type ProblemKind } from '../../shared/problems.js';
import { HttpError } from '../errors.js';
import { JSON_TYPE } from './media-type.js';
import { ObservedResponse, REQUEST_ID_HEADER } from './observe.js';

/**
 * Sends a JSON body whose serialization is already done. HEAD gets the
 * headers only. The headers go to node in one list: each is validated and
 * written once, with none of setHeader's per-header bookkeeping (the
 * hottest path of the server: every GET of a user ends here).
 */
export function sendJson(res: ServerResponse, status: number, json: string, headers?: Record<string, string>): void {
  const fields: string[] = [];
  if (headers !== undefined) for (const name in headers) fields.push(name, headers[name]!);
  sendJsonFields(res, status, json, fields);
}

/** `sendJson` with the extra headers as a list of names and values, which it extends: a new array for each response. */
export function sendJsonFields(res: ServerResponse, status: number, json: string, fields: string[]): void {
  sendText(res, status, JSON_TYPE, json, fields);
}

/** Sends `text` as a body of `type`, the other headers in `fields`, which it extends. */
function sendText(res: ServerResponse, status: number, type: string, text: string, fields: string[]): void {
  const length = Buffer.byteLength(text);
  fields.push('Content-Type', type, 'Content-Length', String(length));
  res.writeHead(status, res instanceof ObservedResponse ? res.headerList(fields, length) : fields);
  res.end(text);
}

/**
 * `sendJson` with one extra header, `name: value` (a GET's ETag): the list
 * for writeHead made in one piece, where extending a shorter one would
 * grow it (a copy) on every response.
 */
export function sendJsonWith(res: ServerResponse, status: number, json: string, name: string, value: string): void {
  const length = Buffer.byteLength(json);
  const size = String(length);
  const id = res instanceof ObservedResponse ? res.listedHead(length) : '';
  res.writeHead(
    status,
    id === ''
      ? [name, value, 'Content-Type', JSON_TYPE, 'Content-Length', size]
      : [name, value, 'Content-Type', JSON_TYPE, 'Content-Length', size, REQUEST_ID_HEADER, id],
  );
  res.end(json);
}

/** Sends a response without a body (a 304 among them), its headers in one list like `sendJson`. */
export function sendEmpty(res: ServerResponse, status: number, headers?: Record<string, string>): void {
  const fields: string[] = [];
  if (headers !== undefined) for (const name in headers) fields.push(name, headers[name]!);
  sendEmptyFields(res, status, fields);
}

/** `sendEmpty` with the headers as a list of names and values, which it extends. */
export function sendEmptyFields(res: ServerResponse, status: number, fields: string[]): void {
  if (status !== 204 && status !== 304) fields.push('Content-Length', '0');
  res.writeHead(status, fields);
  res.end();
}

export function problemBody(kind: ProblemKind, detail: string, extensions: Record<string, unknown> = {}): string {
  return JSON.stringify({ type: problemType(kind), title: kind.title, status: kind.status, detail, ...extensions });
}

/** Writes an HttpError as application/problem+json (RFC 9457). */
export function sendProblem(res: ServerResponse, error: HttpError): void {
  const fields: string[] = [];
  for (const name in error.headers) fields.push(name, error.headers[name]!);
  fields.push('Cache-Control', 'no-store');
  // node merges a header list with the headers set before (a Cache-Control: private among them), the list's winning.
  sendText(res, error.status, PROBLEM_CONTENT_TYPE, problemBody(error.kind, error.detail, error.extensions), fields);
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

export function notFound(detail = 'There is nothing at this path.'): HttpError {
  return new HttpError(problems.notFound, detail);
}
