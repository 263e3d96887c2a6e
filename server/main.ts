import { readFileSync } from 'node:fs';
import { accountsCommand, type PasswordInput } from './commands/accounts.js';
import { ConfigError, parseConfig, usage } from './ops/config.js';
import { StartupError } from './ops/data-dir.js';
import { startServer } from './http/server.js';
import { repair } from './commands/repair.js';

export interface Io {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
  /** Where `accounts add` reads a password; process.stdin when absent. */
  stdin?: PasswordInput;
}

/**
 * The access log's sink: stdout, until writing to it fails (a reader that
 * went away: EPIPE). Then one note on stderr and no more lines, instead of
 * an unhandled 'error' that would stop the server.
 */
function stdoutSink(io: Io): (chunk: string) => void {
  let failed = false;
  io.stdout.on('error', (error: Error) => {
    if (failed) return;
    failed = true;
    io.stderr.write(`users-server: cannot write to stdout (${error.message}); the access log is off\n`);
  });
  return (chunk) => {
    if (!failed) io.stdout.write(chunk);
  };
}

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/**
 * The users-server command. Exit codes: 0 after a graceful stop, 1 when it
 * cannot start (data directory, lock, port, a damaged journal) or when the
 * journal failed to write, 2 for a bad flag or value. `repair` and
 * `accounts` are their own subcommands (repair.ts, accounts-command.ts).
 */
export async function main(argv: readonly string[], io: Io = { stdout: process.stdout, stderr: process.stderr, env: process.env }): Promise<number> {
  if (argv[0] === 'repair') return repair(argv.slice(1), io);
  if (argv[0] === 'accounts') return accountsCommand(argv.slice(1), { ...io, stdin: io.stdin ?? process.stdin });
  let parsed;
  try {
    parsed = parseConfig(argv, io.env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    io.stderr.write(`users-server: ${error.message} (see --help)\n`);
    return 2;
  }
  if (parsed.help) {
    io.stdout.write(usage() + '\n');
    return 0;
  }
  if (parsed.version) {
    io.stdout.write(version() + '\n');
    return 0;
  }
  // Signals are watched before anything is announced, so a stop asked for as
  // soon as "listening on" appears is still a graceful one.
  let onSignal = () => {};
  let fatal = false;
  const signalled = new Promise<void>((resolve) => {
    onSignal = () => resolve();
  });
  // A journal that cannot sync stops the server like a signal, but exits 1.
  const onFatal = () => {
    fatal = true;
    onSignal();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let running;
  try {
    running = await startServer(parsed.config, { env: io.env, onFatal, logError: (message) => io.stderr.write(message + '\n'), accessLog: stdoutSink(io) });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const message =
      error instanceof StartupError ? error.message
      : code === 'EADDRINUSE' ? `the address ${parsed.config.host}:${parsed.config.port} is already in use`
      : code === 'EACCES' ? `no permission to listen on ${parsed.config.host}:${parsed.config.port}`
      : code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' ? `cannot listen on ${parsed.config.host}: no such local address`
      : undefined;
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    if (message === undefined) throw error;
    io.stderr.write(`users-server: ${message}\n`);
    return 1;
  }
  if (running.adminPasswordFile !== undefined) {
    io.stderr.write(`users-server: generated a password for the account "admin" in ${running.adminPasswordFile}\n`);
  }
  io.stdout.write(`listening on ${running.url}\n`);
  await signalled;
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  await running.stop();
  return fatal ? 1 : 0;
}
