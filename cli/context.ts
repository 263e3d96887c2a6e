/**
 * What every command receives: its I/O, the resolved global options and the
 * HTTP client. Tests run commands in-process with their own Io.
 */
import { createReadStream } from 'node:fs';
import { CliError, errorRecord, CliUsageError } from './exit-codes.js';
import { fileProblem } from '../shared/file-errors.js';
import { HttpClient } from './client.js';
import { defaultJarPath } from './jar.js';
import { listing, resolveOutput, type Listing, type OutputFormat, type View } from './output-format.js';
import { Interruption, Output, readAll } from './streams.js';

export interface Io {
  stdout: { write(chunk: string): unknown; isTTY?: boolean };
  stderr: { write(chunk: string): unknown; isTTY?: boolean };
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
}

export const DEFAULT_URL = 'http://127.0.0.1:8080';
export const DEFAULT_TIMEOUT_SECONDS = 30;
export const DEFAULT_RETRIES = 3;

/** The global flags as commander parsed them (undefined: not given). */
export interface GlobalFlags {
  url?: string;
  cookieJar?: string;
  token?: string;
  json?: boolean;
  timeout?: number;
  retries?: number;
  quiet?: boolean;
  verbose?: boolean;
}

interface GlobalOptions {
  url: URL;
  jarPath: string;
  /** An API token (--token, USERSCTL_TOKEN): used instead of the cookie jar. */
  token: string | undefined;
  json: boolean;
  timeoutMs: number;
  retries: number;
  quiet: boolean;
  verbose: boolean;
}

/** Precedence: flag, then environment, then default. */
export function resolveGlobals(flags: GlobalFlags, env: NodeJS.ProcessEnv): GlobalOptions {
  const urlText = flags.url ?? nonEmpty(env.USERSCTL_URL) ?? DEFAULT_URL;
  // "127.0.0.1:8080" parses as a URL of the scheme "127.0.0.1:", and "localhost" not at all.
  if (/^(\[[0-9a-fA-F:.]+\]|[\w.-]+)(:\d+)?(\/\S*)?$/.test(urlText))
    throw new CliUsageError(`--url: ${urlText} has no scheme: give http://${urlText} (or https://)`);
  let url: URL;
  try {
    url = new URL(urlText);
  } catch {
    throw new CliUsageError(`--url: not a URL: ${urlText}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new CliUsageError(`--url: only http and https URLs are supported, not ${url.protocol}`);
  if (url.search !== '' || url.hash !== '')
    throw new CliUsageError('--url: give the base URL without a query or fragment');
  // usersctl sends no credentials from the URL; one that carries them also shows them in ps and the shell's history.
  if (url.username !== '' || url.password !== '')
    throw new CliUsageError(
      `--url: leave the user and password out of it (${url.protocol}//${url.host}${url.pathname === '/' ? '' : url.pathname}); log in with usersctl login, or use --token`,
    );
  return {
    url,
    jarPath: flags.cookieJar ?? nonEmpty(env.USERSCTL_COOKIE_JAR) ?? defaultJarPath(env),
    token: tokenOf(
      flags.token ?? nonEmpty(env.USERSCTL_TOKEN),
      flags.token !== undefined ? '--token' : 'USERSCTL_TOKEN',
    ),
    json: flags.json === true,
    timeoutMs: Math.round((flags.timeout ?? DEFAULT_TIMEOUT_SECONDS) * 1000),
    retries: flags.retries ?? DEFAULT_RETRIES,
    quiet: flags.quiet === true,
    verbose: flags.verbose === true,
  };
}

/**
 * The token as given, trimmed (a file read with $(cat) may end in a newline); one with spaces or control characters is
 * a usage error.
 */
function tokenOf(value: string | undefined, source: string): string | undefined {
  if (value === undefined) return undefined;
  const token = value.trim();
  if (!/^[\x21-\x7e]+$/.test(token))
    throw new CliUsageError(
      `${source}: an API token is one word of visible characters (ust_...); make one with: usersctl tokens create NAME`,
    );
  return token;
}

/** True unless NO_COLOR is set to a non-empty value (no-color.org). */
export function noColorUnset(env: NodeJS.ProcessEnv): boolean {
  return env.NO_COLOR === undefined || env.NO_COLOR === '';
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

export class Context {
  readonly out: Output;
  /** SIGINT, SIGTERM or a closed output: a streaming command stops sending and says what it did. */
  readonly interruption: Interruption;
  /** Set by a command that printed its own summary of an early stop. */
  stopReported = false;
  readonly client: HttpClient;
  /** Colour on stderr: only on a terminal, and never with NO_COLOR (no-color.org). */
  readonly color: boolean;

  constructor(
    readonly io: Io,
    readonly options: GlobalOptions,
  ) {
    this.out = new Output(io.stdout);
    this.interruption = new Interruption(this.out, io.stdout === process.stdout, (message) => this.fail(message));
    this.color = io.stderr.isTTY === true && noColorUnset(io.env);
    this.client = new HttpClient({
      baseUrl: options.url,
      timeoutMs: options.timeoutMs,
      retries: options.retries,
      jarPath: options.jarPath,
      token: options.token,
      trace: options.verbose ? (line) => io.stderr.write(line + '\n') : undefined,
      warn: (message) => this.warn(message),
      interruption: this.interruption,
    });
  }

  /** The format of a listing command's `-o` (table on a terminal, NDJSON otherwise; `--json` is NDJSON). */
  outputFormat(option: string | undefined): OutputFormat {
    return resolveOutput(option, this.options.json, this.io.stdout.isTTY === true);
  }

  /** Records of `view` on stdout in `format`; a table's header in bold on a terminal without NO_COLOR. */
  listing<T>(format: OutputFormat, view: View<T>, options: { single?: boolean } = {}): Listing<T> {
    const bold = this.io.stdout.isTTY === true && noColorUnset(this.io.env);
    return listing(this.out, format, view, { ...options, bold });
  }

  /** A message for the person at the terminal; -q silences it. */
  info(message: string): void {
    if (!this.options.quiet) this.io.stderr.write(`usersctl: ${message}\n`);
  }

  warn(message: string): void {
    if (!this.options.quiet) this.io.stderr.write(`${this.paint('usersctl: warning:', '33')} ${message}\n`);
  }

  /** A failure line that does not end the command (one of several refs). */
  fail(message: string): void {
    this.io.stderr.write(`${errorPrefix(this.color)} ${message}\n`);
  }

  /** The failure of one ref among several: `REF: why`, or with --json its record. */
  failRef(ref: string, error: CliError): void {
    if (this.options.json)
      this.io.stderr.write(JSON.stringify(errorRecord(error.message, error.exitCode, error, ref)) + '\n');
    else this.fail(`${ref}: ${error.message}`);
  }

  paint(text: string, sgr: string): string {
    return this.color ? `\x1b[${sgr}m${text}\x1b[0m` : text;
  }

  /** `-f FILE` or `-f -` (stdin) as text; an unreadable file is a usage error. */
  async readInput(file: string): Promise<string> {
    if (file === '-') return readAll(this.io.stdin as AsyncIterable<Buffer | string>, 'stdin');
    try {
      return await readAll(createReadStream(file), file);
    } catch (error) {
      if (error instanceof CliError) throw error;
      throw new CliUsageError(fileProblem('read', file, error));
    }
  }

  async close(): Promise<void> {
    this.interruption.dispose();
    this.out.dispose();
    await this.client.close();
  }
}

export function errorPrefix(color: boolean): string {
  return color ? '\x1b[1;31musersctl:\x1b[0m' : 'usersctl:';
}
