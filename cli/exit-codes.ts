/**
 * The errors usersctl's commands throw, and the exit code each maps to.
 * The one top-level catch in main.ts turns any of them into one line on
 * stderr and the process's exit code.
 */

export const EXIT = {
  ok: 0,
  unexpected: 1,
  usage: 2,
  notFound: 3,
  unauthorized: 4,
  conflict: 5,
  server: 6,
  network: 7,
  partialImport: 8,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** An error with a chosen exit code and a message meant for the user. */
export class CliError extends Error {
  override readonly name: string = 'CliError';
  constructor(
    message: string,
    readonly exitCode: ExitCode,
  ) {
    super(message);
  }
}

/** Bad flags, arguments or input: exit 2. */
export class UsageError extends CliError {
  override readonly name = 'UsageError';
  constructor(message: string) {
    super(message, EXIT.usage);
  }
}

/** The connection failed, DNS failed or a timeout passed, after any retries: exit 7. */
export class NetworkError extends CliError {
  override readonly name = 'NetworkError';
  constructor(
    message: string,
    /** The underlying error's code (ECONNREFUSED, UND_ERR_HEADERS_TIMEOUT, ...). */
    readonly code: string | undefined,
  ) {
    super(message, EXIT.network);
  }
}

/** The server answered with a status the command treats as a failure. */
export class StatusError extends CliError {
  override readonly name = 'StatusError';
  constructor(
    readonly status: number,
    /** The problem's `detail` (or the best text the response offers). */
    readonly detail: string,
  ) {
    super(detail, exitCodeForStatus(status));
  }
}

/**
 * The exit code for a failed HTTP status: 404 → 3, 401/403 → 4, other 4xx → 5,
 * 5xx → 6 (by the time a command sees one, the retries are spent), anything
 * else a command did not expect → 1.
 */
export function exitCodeForStatus(status: number): ExitCode {
  if (status === 404) return EXIT.notFound;
  if (status === 401 || status === 403) return EXIT.unauthorized;
  if (status >= 400 && status < 500) return EXIT.conflict;
  if (status >= 500 && status < 600) return EXIT.server;
  return EXIT.unexpected;
}
