/**
 * A request that got no answer, as one sentence with what to check: each
 * error code of node, undici and TLS that a network failure carries becomes
 * a NetworkError; an answer that is not HTTP/1.1 is an unexpected answer,
 * and an error that is a bug in the caller is thrown as it is.
 */
import { NetworkError, UnexpectedAnswerError } from './exit-codes.js';

/** Where the failed request went, and what this run knows of the server. */
interface Attempt {
  origin: string;
  timeoutMs: number;
  /** True once the server answered anything in HTTP in this run: it is no HTTPS port. */
  answered: boolean;
}

/** What a sentence of a failure may name. */
interface Failure extends Attempt {
  host: string;
  seconds: number;
  error: unknown;
}

type Sentence = (failure: Failure) => string;

/** undici errors that are bugs in the caller, not the network. */
const PROGRAMMING_CODES: ReadonlySet<string> = new Set([
  'UND_ERR_INVALID_ARG',
  'UND_ERR_INVALID_RETURN_VALUE',
  'UND_ERR_NOT_SUPPORTED',
]);

/** The sentence of each code (several codes say the same thing). */
const SENTENCES: ReadonlyMap<string, Sentence> = new Map([
  ...says(['ECONNREFUSED'], (f) => `cannot connect to ${f.origin}: connection refused`),
  ...says(['ENOTFOUND', 'EAI_AGAIN'], (f) => `cannot resolve the host name in ${f.origin}`),
  ...says(['UND_ERR_CONNECT_TIMEOUT'], (f) => `cannot connect to ${f.origin}: no connection within ${f.seconds} s`),
  ...says(
    ['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT'],
    (f) => `${f.host} did not answer within ${f.seconds} s`,
  ),
  ...says(
    ['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET'],
    (f) => `the connection to ${f.host} was closed before the answer was complete${perhapsHttps(f)}`,
  ),
  ...says(
    [
      'DEPTH_ZERO_SELF_SIGNED_CERT',
      'SELF_SIGNED_CERT_IN_CHAIN',
      'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
      'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
    ],
    (f) =>
      `the certificate of ${f.host} is not signed by an authority this machine trusts; if it is your own, set NODE_EXTRA_CA_CERTS to its CA's PEM file`,
  ),
  ...says(['CERT_HAS_EXPIRED'], (f) => `the certificate of ${f.host} has expired; the server must renew it`),
  ...says(
    ['ERR_TLS_CERT_ALTNAME_INVALID'],
    (f) => `the certificate of ${f.host} is for another host name; use the name it was issued for in --url`,
  ),
  ...says(
    ['EPROTO', 'ERR_SSL_WRONG_VERSION_NUMBER', 'ERR_SSL_PACKET_LENGTH_TOO_LONG'],
    (f) => `${f.host} does not speak TLS on that port; try http:// instead of https:// in --url`,
  ),
]);

function says(codes: readonly string[], sentence: Sentence): [string, Sentence][] {
  return codes.map((code) => [code, sentence]);
}

/**
 * The NetworkError for `error`, thrown by a request to `attempt.origin`.
 * Throws instead where no network failed: UnexpectedAnswerError for an
 * answer usersctl cannot read, `error` itself for a bug in the caller.
 */
export function networkError(error: unknown, attempt: Attempt): NetworkError {
  if (error instanceof NetworkError) return error;
  // Something answered, but not in HTTP/1.1 (an SSH or mail server, a raw socket): not a network failure to retry.
  if (hasName(error, 'HTTPParserError')) throw new UnexpectedAnswerError('not HTTP/1.1');
  const code = errorCode(error);
  if (code === 'UND_ERR_HEADERS_OVERFLOW')
    throw new UnexpectedAnswerError('header fields larger than usersctl reads (16 KiB)');
  if (code === undefined || PROGRAMMING_CODES.has(code)) throw error;
  const failure = { ...attempt, host: new URL(attempt.origin).host, seconds: attempt.timeoutMs / 1000, error };
  const sentence =
    SENTENCES.get(code) ?? ((f) => `network error talking to ${f.host} (${code}); check --url and the server`);
  return new NetworkError(sentence(failure), code);
}

/**
 * A hint for a connection closed before a single byte came back over
 * http:// from a server that has answered nothing in this run: an HTTPS
 * server closes a connection that does not open with TLS, which is how
 * such a --url fails.
 */
function perhapsHttps(failure: Failure): string {
  const read = (failure.error as { socket?: { bytesRead?: unknown } }).socket?.bytesRead;
  return failure.origin.startsWith('http:') && read === 0 && !failure.answered
    ? '; nothing came back: if the server speaks HTTPS there, use https:// in --url'
    : '';
}

/** True when `error`, or an error it was caused by, has this name. */
function hasName(error: unknown, name: string): boolean {
  for (let e = error; typeof e === 'object' && e !== null; e = (e as { cause?: unknown }).cause)
    if ((e as { name?: unknown }).name === name) return true;
  return false;
}

/** The error code of a network failure; AggregateError (happy eyeballs) carries it on its members. */
function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const e = error as { code?: unknown; errors?: unknown; cause?: unknown; name?: unknown };
  if (typeof e.code === 'string') return e.code;
  if (Array.isArray(e.errors))
    for (const inner of e.errors) {
      const code = errorCode(inner);
      if (code !== undefined) return code;
    }
  if (e.cause !== undefined) return errorCode(e.cause);
  if (e.name === 'TimeoutError') return 'ETIMEDOUT';
  return undefined;
}
