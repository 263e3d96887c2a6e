import type { ProblemKind } from '../shared/problems.js';

/**
 * The errors users-server raises on purpose: one family, each kind named for
 * who acts on it. Anything else thrown is a bug: the HTTP layer logs it and
 * answers a bare 500; a command prints it as "unexpected".
 */
export class UsersServerError extends Error {
  override readonly name: string = 'UsersServerError';
}

/** Error.stackTraceLimit as it was before an HttpError's construction. */
let stackTraceLimit = Error.stackTraceLimit;

/**
 * An HttpError's message, with V8's stack capture off until its
 * constructor puts it back (this runs in `super`'s argument, before the
 * capture). Reason: a refusal is never logged with a stack, and capturing
 * one makes a 404 cost 1.74 times the instructions (156,000 against 90,000).
 */
function withoutStack(message: string): string {
  stackTraceLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  return message;
}

/**
 * A request refused on purpose. Handlers throw these; the app turns them
 * into `application/problem+json` from the catalog (shared/problems.ts).
 */
export class HttpError extends UsersServerError {
  override readonly name: string = 'HttpError';
  constructor(
    readonly kind: ProblemKind,
    readonly detail: string,
    /** Extra response headers, such as `Allow` or `Retry-After`. */
    readonly headers: Record<string, string> = {},
    /** Extension members of the problem document, such as `field`. */
    readonly extensions: Record<string, unknown> = {},
  ) {
    super(withoutStack(detail));
    Error.stackTraceLimit = stackTraceLimit;
  }

  get status(): number {
    return this.kind.status;
  }
}

/**
 * The exit codes of users-server and its commands: 0 done, 1 failed, 2 a
 * usage error (`repair` adds 3 of its own: repaired, something dropped).
 */
export const SERVER_EXIT = { ok: 0, failed: 1, usage: 2 } as const;

/** A bad flag, environment variable or argument: the command exits 2 with this one line. */
export class ServerUsageError extends UsersServerError {
  override readonly name: string = 'ServerUsageError';
  readonly exitCode: number = SERVER_EXIT.usage;
}

/**
 * node's parseArgs error as one of our usage sentences: lower case, one
 * line, and what to type instead. `commands` names what a stray word could
 * have been meant as (the server's commands), if anything.
 */
export function flagUsageError(error: unknown, commands?: readonly string[]): ServerUsageError {
  const message = (error as Error).message;
  const unknown = /^Unknown option '([^']*)'/.exec(message);
  if (unknown !== null) return new ServerUsageError(`unknown option '${unknown[1]}'`);
  const missing = /^Option '(\S+?)(?: <value>)?' argument missing/.exec(message);
  if (missing !== null) return new ServerUsageError(`${missing[1]} needs a value`);
  const ambiguous = /^Option '(\S+?)(?: <value>)?' argument is ambiguous/.exec(message);
  if (ambiguous !== null)
    return new ServerUsageError(
      `${ambiguous[1]} needs a value; for one that starts with "-", write ${ambiguous[1]}=VALUE`,
    );
  const stray = /^Unexpected argument '([^']*)'/.exec(message);
  if (stray !== null) {
    return new ServerUsageError(
      commands === undefined
        ? `unexpected argument '${stray[1]}': this command takes flags only`
        : `unknown command '${stray[1]}': the commands are ${commands.join(', ')}`,
    );
  }
  const line = message.split('\n')[0]!;
  return new ServerUsageError(line.charAt(0).toLowerCase() + line.slice(1));
}

/** The server or a command cannot do its work (data directory, lock, port, a taken name): exit 1 with this one line. */
export class ServerCommandError extends UsersServerError {
  override readonly name: string = 'ServerCommandError';
  readonly exitCode: number = SERVER_EXIT.failed;
}

/** Data on disk that cannot be used safely (a damaged journal, a bad accounts file): exit 1, naming the file. */
export class DataError extends ServerCommandError {
  override readonly name: string = 'DataError';
}

/** The store can no longer make writes durable: the request fails and the server stops. */
export class StoreFailedError extends UsersServerError {
  override readonly name: string = 'StoreFailedError';
}

/**
 * The disk holding the journal is full (ENOSPC, EDQUOT): the write was not
 * made, nothing of it is kept, and the server goes on serving reads. The
 * request is answered 503 with Retry-After; writes succeed again once space
 * is freed.
 */
export class StoreFullError extends UsersServerError {
  override readonly name: string = 'StoreFullError';
}

/**
 * The store cannot answer now (a database unreachable, restarting, or too
 * slow): the request is answered 503 with Retry-After, and the next one may
 * succeed. `detail` is safe to show a client: it names no host or password.
 */
export class StoreUnavailableError extends UsersServerError {
  override readonly name: string = 'StoreUnavailableError';
}
