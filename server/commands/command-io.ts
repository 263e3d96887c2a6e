import { sep } from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { fileProblem, writeFailure } from '../../shared/file-errors.js';
import { flagUsageError, SERVER_EXIT, ServerCommandError, ServerUsageError } from '../errors.js';

/** What a users-server command reads and writes: given, so tests run commands in-process. */
export interface CommandIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
  /** Where `accounts add` reads a password; process.stdin when absent. */
  stdin?: PasswordInput;
  /** Where the server hears SIGINT, SIGTERM and SIGHUP; the process when absent. */
  signals?: SignalSource;
}

/** What sends a server its signals: the process, or an emitter in tests. */
export interface SignalSource {
  on(signal: 'SIGINT' | 'SIGTERM' | 'SIGHUP', listener: () => void): unknown;
  off(signal: 'SIGINT' | 'SIGTERM' | 'SIGHUP', listener: () => void): unknown;
}

/** What a command reads a password from: process.stdin, or a stream in tests. */
export interface PasswordInput extends NodeJS.ReadableStream {
  isTTY?: boolean;
  setRawMode?: (mode: boolean) => unknown;
}

type Options = NonNullable<ParseArgsConfig['options']>;
type Flags<T extends Options> = ReturnType<
  typeof parseArgs<{ args: string[]; options: T; strict: true; allowPositionals: false }>
>['values'];

/**
 * A command's flags, parsed strictly: an unknown flag or a missing value is
 * a ServerUsageError naming it. Undefined once `--help` (or `-h`, which `options`
 * must declare) has printed `usage`: the command then exits 0.
 */
export function commandFlags<T extends Options>(
  command: string,
  argv: readonly string[],
  options: T,
  usage: string,
  io: { stdout: { write(chunk: string): unknown } },
): Flags<T> | undefined {
  let values: Flags<T>;
  try {
    ({ values } = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }));
  } catch (error) {
    throw new ServerUsageError(`${flagUsageError(error).message} (see users-server ${command} --help)`);
  }
  if ((values as { help?: boolean }).help === true) {
    io.stdout.write(usage + '\n');
    return undefined;
  }
  return values;
}

/** The code of a failed write to a stream `watchOutput` watches (not EPIPE: a reader that left is its own choice). */
const failedWrites = new WeakMap<object, { code?: string }>();

/**
 * Keeps a failed write to stdout (a full disk under `> file`) from being
 * an uncaught 'error' event, and keeps its code for `finishOutput`; on
 * stderr, where nothing could be reported, only the first.
 */
export function watchOutput(stream: NodeJS.WritableStream): void {
  if (failedWrites.has(stream)) return;
  const state: { code?: string } = {};
  failedWrites.set(stream, state);
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') state.code ??= error.code ?? 'EIO';
  });
}

/** `code`; a ServerCommandError when a write to stdout failed (a stream reports it a tick later). */
export async function finishOutput(io: CommandIo, code: number): Promise<number> {
  await new Promise((resolve) => setImmediate(resolve));
  const failed = failedWrites.get(io.stdout)?.code;
  if (failed === undefined || code !== SERVER_EXIT.ok) return code;
  throw new ServerCommandError(
    `cannot write the output: ${writeFailure(failed)}; the command ran, but what it printed is lost`,
  );
}

/**
 * A file error of a command that writes into `target` (a full disk, say)
 * as one sentence, once what it wrote there is removed; anything else as it is.
 */
export function writtenFilesFailure(command: 'backup' | 'copy', error: unknown, target: string): unknown {
  const failed = error as NodeJS.ErrnoException & { dest?: string };
  if (typeof failed?.code !== 'string') return error;
  const path = failed.dest ?? failed.path ?? target;
  const problem =
    path === target || path.startsWith(target + sep)
      ? fileProblem('write', path, error)
      : fileProblem('read', path, error);
  return new ServerCommandError(`the ${command} failed, and what it had written was removed: ${problem}`);
}

/**
 * What starts each line a command writes on stderr: `users-server copy: `, or `users-server: ` for the server itself.
 */
export function linePrefix(command: string | undefined): string {
  return command === undefined ? 'users-server: ' : `users-server ${command}: `;
}

/**
 * Runs `work`, the command `command` (undefined: the server itself), and
 * resolves to its exit code. A ServerUsageError or ServerCommandError it
 * throws is one line on stderr after `linePrefix` and the error's exit
 * code; anything else is a bug: exit 1 with one sentence, never a stack.
 */
export async function runCommand(
  command: string | undefined,
  work: () => number | Promise<number>,
  io: Pick<CommandIo, 'stderr'>,
): Promise<number> {
  try {
    return await work();
  } catch (error) {
    const known = error instanceof ServerUsageError || error instanceof ServerCommandError;
    io.stderr.write(`${linePrefix(command)}${known ? error.message : unexpected(error)}\n`);
    return known ? error.exitCode : SERVER_EXIT.failed;
  }
}

/** An error no command raises on purpose, as one sentence: its message's first line and its code. */
function unexpected(error: unknown): string {
  const message = (error instanceof Error ? error.message : String(error)).split('\n')[0]!;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return `unexpected error: ${message}${typeof code === 'string' && !message.includes(code) ? ` (${code})` : ''}`;
}
