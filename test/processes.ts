/**
 * The one way tests run child processes: the real `bin/users-server.js` and
 * `bin/usersctl.js` (built first, so a stale dist/ is never tested), and
 * outside tools. Every child is killed when its test ends, and every child
 * still running is killed when the test process exits or is interrupted
 * (SIGINT, SIGTERM from the runner). Waits are on events (a line printed,
 * the process closed), never on sleeps or time limits.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { killGroup, track, untrackGroup } from './children.js';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ADMIN_PASSWORD, buildIfStale, tempDir } from './helpers.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const SERVER_BIN = join(ROOT, 'bin', 'users-server.js');
export const CLI_BIN = join(ROOT, 'bin', 'usersctl.js');

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Child {
  readonly process: ChildProcess;
  readonly pid: number;
  stdout(): string;
  stderr(): string;
  /** Resolves once the process has exited and its output is read; never rejects. */
  readonly exited: Promise<Exit>;
  /** The first line of `stream` matching `pattern`, once printed; rejects if the process exits first. */
  waitForLine(pattern: RegExp, stream?: 'stdout' | 'stderr'): Promise<RegExpExecArray>;
  /** Writes to stdin (spawned with `stdin: 'pipe'`). */
  write(text: string): void;
  kill(signal?: NodeJS.Signals): void;
}

interface SpawnOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** 'pipe' to write to it (`write`, then `process.stdin.end()`); default 'ignore'. */
  stdin?: 'pipe' | 'ignore';
  /**
   * How the test's end stops it while it still runs (say, SIGTERM and a check of the exit); SIGKILL after it if need
   * be.
   */
  stop?: (child: Child) => Promise<void>;
  /**
   * Runs it in a process group of its own, which `kill` signals as a whole
   * (as Ctrl-C or a service manager stops a shell's pipeline); whatever is
   * left of the group is killed when the test ends.
   */
  group?: boolean;
}

/** The test process's environment without USERS_* (so nothing leaks in) and without node:test's marker. */
export function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!k.startsWith('USERS_') && !k.startsWith('USERSCTL_') && k !== 'NODE_TEST_CONTEXT') env[k] = v;
  return env;
}

/**
 * Runs `command` with `args`; killed after the test `t` if it is still
 * running (without a test, by its owner or when this process exits).
 */
export function spawnChild(
  t: TestContext | undefined,
  command: string,
  args: readonly string[],
  options: SpawnOptions = {},
): Child {
  const group = options.group === true;
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env ?? cleanEnv(),
    stdio: [options.stdin ?? 'ignore', 'pipe', 'pipe'],
    detached: group,
  });
  track(child, group);
  const text = { stdout: '', stderr: '' };
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (text.stdout += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (text.stderr += s));
  const exited = new Promise<Exit>((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal }));
    child.on('error', () => resolve({ code: null, signal: null }));
  });
  const stillRunning = () => child.exitCode === null && child.signalCode === null;
  t?.after(async () => {
    if (stillRunning() && options.stop !== undefined) await options.stop(handle);
    if (stillRunning()) child.kill('SIGKILL');
    if (group) {
      killGroup(child.pid!, 'SIGKILL');
      untrackGroup(child.pid!);
    }
    await exited;
  });
  const waitForLine = (pattern: RegExp, stream: 'stdout' | 'stderr' = 'stdout') =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const source = stream === 'stdout' ? child.stdout! : child.stderr!;
      const check = () => {
        for (const line of text[stream].split('\n')) {
          const match = pattern.exec(line);
          if (match === null) continue;
          source.off('data', check);
          resolve(match);
          return;
        }
      };
      source.on('data', check);
      check();
      void exited.then(({ code, signal }) => {
        source.off('data', check);
        reject(
          new Error(
            `${command} exited (code ${code}, signal ${signal}) before printing ${pattern}; stdout=${JSON.stringify(text.stdout)} stderr=${JSON.stringify(text.stderr)}`,
          ),
        );
      });
    });
  const handle: Child = {
    process: child,
    pid: child.pid ?? -1,
    stdout: () => text.stdout,
    stderr: () => text.stderr,
    exited,
    waitForLine,
    write: (s) => child.stdin!.write(s),
    kill: (signal = 'SIGTERM') => (group ? killGroup(child.pid!, signal) : child.kill(signal)),
  };
  return handle;
}

/** Runs a tool to its end with `input` on stdin; resolves with its exit code (-1 when killed) and output. */
export async function runTool(
  t: TestContext | undefined,
  command: string,
  args: readonly string[],
  options: { input?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = spawnChild(t, command, args, { stdin: 'pipe', env: options.env ?? process.env });
  // A tool may exit before reading all of its input.
  child.process.stdin!.on('error', () => {});
  child.process.stdin!.end(options.input ?? '');
  const { code } = await child.exited;
  return { code: code ?? -1, stdout: child.stdout(), stderr: child.stderr() };
}

interface ServerChild extends Child {
  /** Set by `spawnServer` once the server listens. */
  url: string;
  port: number;
}

/**
 * Runs `node bin/users-server.js ARGS` (dist/ rebuilt first when stale) in a
 * temporary working directory, so a default ./data never lands in the
 * repository. The admin password is set, the password cost lowered and
 * /users open (`USERS_REQUIRE_SESSION=none`, as the in-process harness has
 * it) unless `env` says otherwise: a story of the product's defaults (the
 * README's, the docs') passes `USERS_REQUIRE_SESSION: undefined`. Other
 * USERS_* variables come from `env` only.
 */
export function spawnUsersServer(t: TestContext, args: readonly string[], options: SpawnOptions = {}): Child {
  const stale = buildIfStale();
  if (stale !== undefined) throw new Error(stale);
  const env: NodeJS.ProcessEnv = {
    ...cleanEnv(),
    USERS_ADMIN_PASSWORD: ADMIN_PASSWORD,
    USERS_PASSWORD_COST: '1',
    USERS_REQUIRE_SESSION: 'none',
    ...options.env,
  };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  return spawnChild(t, process.execPath, [SERVER_BIN, ...args], {
    ...options,
    cwd: options.cwd ?? tempDir(t, 'users-server-cwd-'),
    env,
  });
}

/** `spawnUsersServer`, then waits for its "listening on" line. */
export async function spawnServer(
  t: TestContext,
  args: readonly string[],
  options: SpawnOptions = {},
): Promise<ServerChild> {
  const child = spawnUsersServer(t, args, options);
  const match = await child.waitForLine(/^listening on (https?:\/\/\S+:(\d+))$/);
  return Object.assign(child, { url: match[1]!, port: Number(match[2]) });
}

/** Runs `node bin/usersctl.js ARGS` (dist/ rebuilt first when stale). */
export function spawnUsersctl(t: TestContext, args: readonly string[], options: SpawnOptions = {}): Child {
  const stale = buildIfStale();
  if (stale !== undefined) throw new Error(stale);
  return spawnChild(t, process.execPath, [CLI_BIN, ...args], options);
}

/**
 * A server's stderr without its start lines that say where the data is and who may use it (the rest is what a test
 * checks: warnings, the first-login line).
 */
export function beyondDataLine(stderr: string): string {
  return stderr
    .replace(/^users-server: (data in .*|users in memory only: .*)\n/m, '')
    .replace(/^users-server: access: .*\n/m, '');
}

/** The lowest port the kernel hands out itself (listen on port 0, a client's local port): ip_local_port_range. */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0]);
    return Number.isInteger(low) && low > 0 ? low : 32768;
  } catch {
    return 32768;
  }
}

const PORT_FLOOR = 10_000;

/**
 * A TCP port free on 127.0.0.1 now, for a server a test starts on a port
 * of its choosing (PostgreSQL, pgbouncer, a users-server started again on
 * the same port). It is taken below the kernel's ephemeral range, so no
 * socket another test opens meanwhile (a listener on port 0, a client's
 * local port) can take it before that server binds it, and no client
 * retrying a connection to it while the server is down can connect to
 * itself (a TCP self-connect: source port = destination port, which only
 * happens with a port from the ephemeral range). Chosen at random: test
 * processes run side by side.
 */
export async function serverPort(): Promise<number> {
  const low = ephemeralLow();
  if (low <= PORT_FLOOR + 1000) return kernelPort();
  for (;;) {
    const port = PORT_FLOOR + Math.floor(Math.random() * (low - PORT_FLOOR));
    if (await isFree(port)) return port;
  }
}

function isFree(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A port the kernel picks: where the range below its own is too small to choose from. */
async function kernelPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
