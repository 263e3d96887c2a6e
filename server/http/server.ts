import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { problems, type ProblemKind } from '../../shared/problems.js';
import { AccessLog, type LogSink } from '../ops/access-log.js';
import { AccountsFileError, AccountsFileWatcher } from '../security/accounts-file.js';
import { Accounts, hashPassword } from '../security/accounts.js';
import { createApp, type App } from './app.js';
import type { Config } from '../ops/config.js';
import { acquireLock, ensureDataDir, loadOrCreateAdminPassword, loadOrCreateSecret, StartupError } from '../ops/data-dir.js';
import { declaresTooLarge, problemBody, rawProblemResponse } from './response.js';
import { InFlight, ObservedResponse, Observer } from './observe.js';
import { JournalStore, type JournalIo } from '../store/journal/journal.js';
import { MemoryStore } from '../store/memory/memory-store.js';
import { CorruptionError } from '../store/journal/recovery.js';
import type { Store } from '../store/store.js';

/** API.md "Access control and limits": headers 10 s, whole request 30 s, idle keep-alive 5 s. */
export const TIMEOUTS = { headers: 10_000, request: 30_000, keepAlive: 5_000, connectionsCheck: 2_000 };
const SWEEP_INTERVAL_MS = 60_000;
const STOP_GRACE_MS = 10_000;
const DRAIN_MS = 1_000;

export interface RunningServer {
  readonly url: string;
  readonly server: Server<typeof IncomingMessage, typeof ObservedResponse>;
  readonly app: App;
  readonly store: Store;
  /** Where a generated admin password was written, when it was generated on this start. */
  readonly adminPasswordFile: string | undefined;
  /** Graceful stop: refuse new connections, let in-flight requests finish, flush the store. */
  stop(): Promise<void>;
}

export interface StartOptions {
  env?: NodeJS.ProcessEnv;
  logError?: (message: string) => void;
  clock?: () => number;
  /**
   * Called once if the journal cannot write or sync: the affected requests
   * have failed and the server must stop. Without it the server stops itself.
   */
  onFatal?: (error: Error) => void;
  /** Tests inject failing file system calls into the journal's write path. */
  journalIo?: JournalIo;
  /** Tests only: shorter timeouts than API.md's, so a timeout test takes a second, not half a minute. */
  timeouts?: Partial<typeof TIMEOUTS>;
  /** Where access log lines go (`--log-format`); stdout when not given. */
  accessLog?: LogSink;
}

/** Prepares the data directory, opens the store and listens. */
export async function startServer(config: Config, options: StartOptions = {}): Promise<RunningServer> {
  const env = options.env ?? process.env;
  const dataDir = ensureDataDir(config.data);
  const releaseLock = acquireLock(dataDir);
  let store: Store | undefined;
  let accountsFile: AccountsFileWatcher | undefined;
  try {
    const secrets = config.secrets.length > 0 ? config.secrets : [loadOrCreateSecret(dataDir)];
    const keys = secrets.map((s) => Buffer.from(s, 'utf8'));
    const admin = loadOrCreateAdminPassword(dataDir, env.USERS_ADMIN_PASSWORD);
    const accounts = new Accounts();
    // scrypt runs on the thread pool while the journal replays on this thread.
    const adminHash = hashPassword(admin.password);
    adminHash.catch(() => {});
    const logError = options.logError ?? ((message: string) => process.stderr.write(message + '\n'));
    accountsFile = openAccountsFile(dataDir, accounts, logError);
    let stop: () => Promise<void> = async () => {};
    const onFatal = (error: Error) => {
      logError(`users-server: ${error.message}; stopping: a failed sync cannot be retried safely`);
      if (options.onFatal) options.onFatal(error);
      else void stop();
    };
    const opened = openStore(config, dataDir, { log: logError, onFatal, ...(options.clock && { now: options.clock }), ...(options.journalIo && { io: options.journalIo }) });
    store = opened;
    accounts.add('admin', 'admin', await adminHash);
    const app = createApp({ store: opened, config, accounts, accountsFile, keys, ...(options.clock && { clock: options.clock }), ...(options.logError && { logError: options.logError }) });
    const accessLog = config.logFormat === 'off' ? undefined : new AccessLog(config.logFormat, options.accessLog ?? ((chunk) => process.stdout.write(chunk)), options.clock);
    const observer = new Observer(app.metrics, accessLog);
    const timeouts = { ...TIMEOUTS, ...options.timeouts };
    // Responses are ObservedResponses: the observer keeps its per-request
    // figures in their fields instead of in closures.
    const server = createServer<typeof IncomingMessage, typeof ObservedResponse>({
      headersTimeout: timeouts.headers,
      requestTimeout: timeouts.request,
      keepAliveTimeout: timeouts.keepAlive,
      connectionsCheckingInterval: timeouts.connectionsCheck,
      ServerResponse: ObservedResponse,
      // The app checks Host itself, to answer with a problem document.
      requireHostHeader: false,
    });
    let stopping = false;
    // Responses under way, so a stop can mark them Connection: close: node
    // keeps a connection whose response ends after server.close() open until
    // its keep-alive timeout.
    const inFlight = new InFlight();
    /** Set by stop: called once the last response in flight has ended. */
    let drained: (() => void) | undefined;
    // One listener shared by every response ('close' comes once per response).
    function ended(this: ObservedResponse) {
      inFlight.delete(this);
      observer.end(this);
      if (drained !== undefined && inFlight.size === 0) drained();
    }
    const handle = (req: IncomingMessage, res: ObservedResponse) => {
      // RFC 9112 section 9.3.2: pipelined requests are served in order. node
      // emits each as soon as it is parsed, and gives a response its socket
      // only once the one before it has finished: wait for that, so a GET
      // after a PUT sees the PUT.
      if (res.socket === null) {
        res.once('socket', () => handle(req, res));
        return;
      }
      // Parsed behind an answer that closes the connection (a 413, say): it
      // could never be answered, so it is not served either.
      if (!res.socket.writable) return;
      // While stopping, finish this request but do not keep its connection.
      if (stopping) res.setHeader('Connection', 'close');
      observer.begin(req, res);
      inFlight.add(res);
      res.on('close', ended);
      app.handle(req, res);
    };
    server.on('request', handle);
    // Expect: 100-continue (RFC 9110 section 10.1.1): refuse an oversized body
    // before the client sends it.
    server.on('checkContinue', (req: IncomingMessage, res: ObservedResponse) => {
      if (!declaresTooLarge(req, config.maxBody)) res.writeContinue();
      handle(req, res);
    });
    // Any other expectation: RFC 9110 section 10.1.1 lets a server ignore
    // it, so it is served like any request (node would answer a bare 417).
    server.on('checkExpectation', handle);
    server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => answerClientError(error, socket, observer));
    // node hands a CONNECT's socket to this event and, with no listener,
    // destroys it unanswered. Its authority-form target is not one this
    // server routes (docs/api.md "Routing and request targets"): 400.
    server.on('connect', (_req: IncomingMessage, socket: Socket) => {
      // node has removed its own error handler from this socket.
      socket.on('error', () => socket.destroy());
      const detail = 'CONNECT is not served: the request target must be a path or an absolute http URI.';
      socket.end(rawProblemResponse(problems.badRequest, detail, observer.raw(400, Buffer.byteLength(problemBody(problems.badRequest, detail)))));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const address = server.address();
    const port = typeof address === 'object' && address !== null ? address.port : config.port;
    const host = config.host.includes(':') ? `[${config.host}]` : config.host;
    const sweeper = setInterval(() => opened.state.sweep(Date.now()), SWEEP_INTERVAL_MS);
    sweeper.unref();

    let stopped: Promise<void> | undefined;
    stop = () =>
      (stopped ??= (async () => {
        stopping = true;
        clearInterval(sweeper);
        accountsFile?.close();
        for (const res of inFlight.all()) if (!res.headersSent) res.setHeader('Connection', 'close');
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        const grace = setTimeout(() => server.closeAllConnections(), STOP_GRACE_MS);
        await closed;
        clearTimeout(grace);
        // The server closes when its sockets are destroyed; their responses'
        // 'close' events, which write the last log lines, may come just after.
        // (Bounded, so a response that never reports cannot hold the stop.)
        if (inFlight.size > 0) {
          let bound: NodeJS.Timeout | undefined;
          await new Promise<void>((resolve) => {
            drained = resolve;
            bound = setTimeout(resolve, DRAIN_MS);
          });
          clearTimeout(bound);
        }
        accessLog?.flush();
        await opened.close();
        releaseLock();
      })());
    return { url: `http://${host}:${port}`, server, app, store: opened, adminPasswordFile: admin.created ? admin.path : undefined, stop };
  } catch (error) {
    accountsFile?.close();
    await store?.close();
    releaseLock();
    throw error;
  }
}

function openAccountsFile(dataDir: string, accounts: Accounts, log: (message: string) => void): AccountsFileWatcher {
  try {
    return new AccountsFileWatcher(dataDir, accounts, log);
  } catch (error) {
    if (error instanceof AccountsFileError) throw new StartupError(error.message);
    throw error;
  }
}

function openStore(config: Config, dataDir: string, options: { log: (message: string) => void; onFatal: (error: Error) => void; now?: () => number; io?: JournalIo }): Store {
  if (config.store === 'memory') return new MemoryStore();
  try {
    return JournalStore.open(dataDir, { compactionFloor: config.compactionFloor, ...options });
  } catch (error) {
    if (error instanceof CorruptionError) throw new StartupError(error.message);
    const e = error as NodeJS.ErrnoException;
    if (e.code !== undefined && e.syscall !== undefined) throw new StartupError(`cannot open the store in ${dataDir}: ${e.code} (${e.syscall} ${e.path ?? ''})`);
    throw error;
  }
}

/**
 * Errors node:http's parser raises before a request exists (malformed
 * request line or headers, oversized headers, timeouts) answered as
 * problem documents instead of node's bare responses, with a request id,
 * and logged and counted like requests.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Socket, observer: Observer): void {
  if (!socket.writable || error.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  let kind: ProblemKind;
  let detail: string;
  if (error.code === 'HPE_HEADER_OVERFLOW') [kind, detail] = [problems.requestHeaderFieldsTooLarge, 'The request headers are too large.'];
  else if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') [kind, detail] = [problems.requestTimeout, 'The request took too long to arrive.'];
  else [kind, detail] = [problems.badRequest, 'The request is not valid HTTP/1.1.'];
  const id = observer.raw(kind.status, Buffer.byteLength(problemBody(kind, detail)));
  socket.end(rawProblemResponse(kind, detail, id));
}
