/**
 * Helpers for the usersctl tests: run() in-process with captured output and
 * an injected environment, and small stub servers for what the real server
 * never does on demand (5xx, hanging, garbage).
 */
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import type { TestContext } from 'node:test';
import { run } from '../cli/main.js';
import { ADMIN_PASSWORD, buildIfStale, startTestServer, tempDir, type TestServer } from './helpers.js';
import { CLI_BIN, SERVER_BIN } from './processes.js';
import type { Config } from '../server/ops/config.js';

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  env?: NodeJS.ProcessEnv;
  /** stdin content; default: empty. */
  stdin?: string | Buffer | Readable;
  stdinTTY?: boolean;
  stdoutTTY?: boolean;
  stderrTTY?: boolean;
}

/** Runs usersctl in-process; stdin is empty unless given, never the test runner's. */
export async function usersctl(args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  let stdout = '';
  let stderr = '';
  const stdin =
    options.stdin instanceof Readable
      ? options.stdin
      : Readable.from(options.stdin === undefined ? [] : [Buffer.from(options.stdin)]);
  if (options.stdinTTY !== undefined) (stdin as Readable & { isTTY?: boolean }).isTTY = options.stdinTTY;
  const code = await run(args, {
    stdout: { write: (chunk: string) => (stdout += chunk), isTTY: options.stdoutTTY === true },
    stderr: { write: (chunk: string) => (stderr += chunk), isTTY: options.stderrTTY === true },
    stdin: stdin as NodeJS.ReadableStream,
    env: options.env ?? {},
  });
  return { code, stdout, stderr };
}

/** The lines of a text, without the empty string after a final newline. */
export function lines(text: string): string[] {
  return text === '' ? [] : text.replace(/\n$/, '').split('\n');
}

export interface CliServer {
  server: TestServer;
  /** HOME and XDG_STATE_HOME in a temp dir, USERSCTL_URL at the server. */
  env: NodeJS.ProcessEnv;
  /** Where the default jar of `env` lives. */
  jarPath: string;
  run(args: readonly string[], options?: RunOptions): Promise<RunResult>;
  /** `usersctl login --password-stdin` as admin; asserts success. */
  login(): Promise<void>;
}

/** A real server on port 0 and a usersctl environment pointing at it, with a private jar. */
export async function startCliServer(t: TestContext, overrides: Partial<Config> = {}): Promise<CliServer> {
  const server = await startTestServer(t, overrides);
  const home = tempDir(t, 'usersctl-home-');
  const env = { HOME: home, XDG_STATE_HOME: join(home, 'state'), USERSCTL_URL: server.url };
  const runIn = (args: readonly string[], options: RunOptions = {}) =>
    usersctl(args, { ...options, env: { ...env, ...options.env } });
  return {
    server,
    env,
    jarPath: join(home, 'state', 'usersctl', 'cookies.txt'),
    run: runIn,
    async login() {
      const result = await runIn(['login', '--password-stdin'], { stdin: ADMIN_PASSWORD + '\n' });
      if (result.code !== 0) throw new Error(`login failed: ${result.code} ${result.stderr}`);
    },
  };
}

interface Stub {
  url: string;
  /** Every request the stub received, in order. */
  requests: Array<{ method: string; url: string; headers: IncomingMessage['headers']; body: string }>;
  /** Distinct TCP connections seen. */
  connections: number;
}

/**
 * A node:http server whose handler decides each answer; `n` counts requests
 * from 0. The handler may leave the response open (a hanging server).
 */
export async function startStub(
  t: TestContext,
  handler: (req: IncomingMessage, res: ServerResponse, n: number, body: string) => void,
): Promise<Stub> {
  const stub: Stub = { url: '', requests: [], connections: 0 };
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const n = stub.requests.length;
      stub.requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      handler(req, res, n, body);
    });
  });
  server.on('connection', (socket: Socket) => {
    stub.connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  stub.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return stub;
}

/** Answers a problem document, as users-server does. */
export function sendProblem(
  res: ServerResponse,
  status: number,
  detail: string,
  headers: Record<string, string> = {},
): void {
  const body = JSON.stringify({ type: 'tag:users-server,2026:problem/test', title: 'Test', status, detail });
  res.writeHead(status, {
    'content-type': 'application/problem+json',
    'content-length': Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}

export function sendJsonText(
  res: ServerResponse,
  status: number,
  body: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

/** A URL where nothing listens: a port that was just free. */
export async function closedPortUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/** A stdin that claims to be a terminal, with raw-mode switching recorded. */
export function fakeTty(): PassThrough & {
  isTTY: true;
  isRaw: boolean;
  setRawMode(mode: boolean): void;
  rawModes: boolean[];
} {
  const stream = new PassThrough() as PassThrough & {
    isTTY: true;
    isRaw: boolean;
    setRawMode(mode: boolean): void;
    rawModes: boolean[];
  };
  stream.isTTY = true;
  stream.isRaw = false;
  stream.rawModes = [];
  stream.setRawMode = (mode: boolean) => {
    stream.isRaw = mode;
    stream.rawModes.push(mode);
  };
  return stream;
}

/**
 * A shell environment whose PATH finds `usersctl` and `users-server` (the built bin/,
 * as after `npm ci` and `npm link`), rooted in a fresh HOME; for tests that
 * run shell lines as a user would. `dist/` is rebuilt first when stale.
 */
export function shellWithUsersctl(t: TestContext, url: string): { home: string; env: NodeJS.ProcessEnv } {
  const stale = buildIfStale();
  if (stale !== undefined) throw new Error(stale);
  const home = tempDir(t, 'usersctl-home-');
  const bin = join(home, 'bin');
  mkdirSync(bin);
  for (const [name, script] of [
    ['usersctl', CLI_BIN],
    ['users-server', SERVER_BIN],
  ]) {
    writeFileSync(join(bin, name!), `#!/bin/sh\nexec "${process.execPath}" "${script}" "$@"\n`);
    chmodSync(join(bin, name!), 0o755);
  }
  return {
    home,
    env: { PATH: `${bin}:${process.env.PATH}`, HOME: home, XDG_STATE_HOME: join(home, 'state'), USERSCTL_URL: url },
  };
}
