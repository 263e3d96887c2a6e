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
/** A command stopped early, as a shell reports a process a signal ended (streams.ts STOP_EXIT). */
export type StopExitCode = 130 | 141 | 143;

/** An error with a chosen exit code and a message meant for the user. */
export class CliError extends Error {
  override readonly name: string = 'CliError';
  /** The user ref the failure is about, when the command knows it (for --json). */
  ref: string | undefined;
  constructor(
    message: string,
    readonly exitCode: ExitCode | StopExitCode,
  ) {
    super(message);
  }
}

/** Bad flags, arguments or input: exit 2. */
export class CliUsageError extends CliError {
  override readonly name: string = 'CliUsageError';
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

/**
 * A 2xx answer that is not what users-server sends (a web server's page at
 * --url, say): exit 1, with what was expected and what to check.
 */
export class UnexpectedAnswerError extends CliError {
  override readonly name = 'UnexpectedAnswerError';
  constructor(what: string) {
    super(
      `unexpected answer from the server: ${what}; check that --url is the address of users-server`,
      EXIT.unexpected,
    );
  }
}

/** The server answered with a status the command treats as a failure. */
export class StatusError extends CliError {
  override readonly name = 'StatusError';
  constructor(
    readonly status: number,
    /** The problem's `detail` (or the best text the response offers). */
    readonly detail: string,
    /** The problem's `type` and `title`, when the answer was a problem document. */
    readonly type?: string,
    readonly title?: string,
    /** Where the status alone does not say it: a 400 that refuses what the user typed (a --filter) is a usage error. */
    exitCode: ExitCode = exitCodeForStatus(status),
    /** A user the server's schema refused: every violation, each said on a line of its own. */
    readonly violations: readonly Violation[] = [],
  ) {
    super(detail, exitCode);
  }
}

/** One way a user breaks the server's schema of the users' fields (a 422 `invalid-user`'s `errors`). */
export interface Violation {
  readonly field: string;
  readonly keyword: string;
  readonly detail: string;
}

/** What `--json` prints on stderr for a failure: one JSON object a line. */
interface ErrorRecord {
  /** The HTTP status, or null when no answer came (usage, network). */
  status: number | null;
  /** The problem type URI, or `usersctl:<kind>` for a failure of the client's own. */
  type: string;
  title: string;
  detail: string;
  /** The ref the failure is about, when the command took refs. */
  ref: string | null;
  exit: number;
  /** A user the server's schema refused: every violation. */
  errors?: readonly Violation[];
}

const OWN_TITLES: Record<number, [string, string]> = {
  [EXIT.usage]: ['usersctl:usage', 'Bad flags, arguments or input'],
  [EXIT.network]: ['usersctl:network', 'The server could not be reached'],
  [EXIT.unexpected]: ['usersctl:unexpected', 'Unexpected error'],
};

/** The record of a failure, for `--json`. */
export function errorRecord(message: string, exit: number, error: unknown, givenRef?: string): ErrorRecord {
  const ref = givenRef ?? (error instanceof CliError ? error.ref : undefined);
  if (error instanceof StatusError) {
    return {
      status: error.status,
      type: error.type ?? 'about:blank',
      title: error.title ?? '',
      detail: error.detail,
      ref: ref ?? null,
      exit,
      ...(error.violations.length > 0 && { errors: error.violations }),
    };
  }
  const [type, title] = OWN_TITLES[exit] ?? ['usersctl:error', 'Error'];
  return { status: null, type, title, detail: message, ref: ref ?? null, exit };
}

/**
 * The exit code for a failed HTTP status: 404 → 3, 401/403 → 4, other 4xx → 5,
 * 5xx → 6 (by the time a command sees one, the retries are spent), anything
 * else a command did not expect → 1.
 */
function exitCodeForStatus(status: number): ExitCode {
  if (status === 404) return EXIT.notFound;
  if (status === 401 || status === 403) return EXIT.unauthorized;
  if (status >= 400 && status < 500) return EXIT.conflict;
  if (status >= 500 && status < 600) return EXIT.server;
  return EXIT.unexpected;
}

/**
 * An answer whose body did not all come within --timeout of its head (a
 * server that trickles a byte at a time): a network failure, exit 7.
 */
export class AnswerTimeoutError extends NetworkError {
  constructor(host: string, seconds: number) {
    super(`${host} did not send its whole answer within ${seconds} s of its head`, 'ANSWER_TIMEOUT');
  }
}
