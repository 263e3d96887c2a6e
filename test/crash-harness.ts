/**
 * The crash harness: the real server as a child process (`node
 * bin/users-server.js`, so dist/ must be built), 64 concurrent clients, and
 * `kill -9` at a random moment, over and over on one data directory. Used by
 * test/journal-crash.test.ts (a few dozen cycles) and bench/crash.ts (200).
 *
 * What it checks after every restart, from what the clients were told:
 *
 * - Every acknowledged write is there. A response received (2xx, whole body)
 *   is an acknowledgement: the server sends it only after the record is
 *   synced. A request without an answer (in flight at the kill) may or may
 *   not have happened. For a user written by several clients, the value after
 *   the restart must come from a write that was acknowledged or in flight,
 *   and not from one that an acknowledged write is known to follow (it was
 *   sent after the first one's answer arrived: the journal is in commit
 *   order, and a restart recovers a prefix of it that holds every
 *   acknowledged commit).
 * - Ids: every id the server was seen to issue (reservations, POST
 *   /users/new, PUT through a new alias) is issued once, and after a restart
 *   every new id is above every id acknowledged or stored before it. An id
 *   issued but never acknowledged nor stored may be issued again: no client
 *   saw it.
 * - A live reservation survives: a PUT under it answers 201 after restarts.
 * - A deleted user stays deleted (GET 404, PUT 410: the id stays issued).
 * - An acknowledged Idempotency-Key replays its first answer after a
 *   restart; a key in flight at the kill either replays (its user is stored)
 *   or creates afresh (and then its earlier attempt left no user: the user
 *   and the key are one commit).
 * - Aliases stay bound to their users.
 * - The data directory, as the server starts listening, is a consistent
 *   set of files: at most one snapshot, journals from its generation on
 *   without a gap, no temp file.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { track } from './children.js';
import { mkdtempSync, readdirSync, rmSync, watch, type FSWatcher } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(ROOT, 'bin', 'users-server.js');
const ADMIN_PASSWORD = 'crash-harness-admin-password';

interface CrashOptions {
  cycles: number;
  /** Concurrent clients (default 64). */
  clients?: number;
  /** The kill comes this many ms after the server's first answer, uniformly drawn (default [50, 400]). */
  killAfterMs?: [number, number];
  /** Extra server flags, e.g. ['--compaction-floor', '4096']. */
  serverArgs?: string[];
  /**
   * Share of cycles (0..1) whose kill is set off by the server creating,
   * renaming or removing a journal or snapshot file (a compaction under
   * way), seen through fs.watch, instead of by a timer.
   */
  killOnCompaction?: number;
  /** About how many users the workload keeps alive: deletes grow more frequent above it (default 400). */
  targetUsers?: number;
  /** Seed of the workload's choices (the timing is the machine's). */
  seed?: number;
  /** The server entry point (default bin/users-server.js); a self-test points it at a broken copy. */
  bin?: string;
  /** Keep the data directory after a clean run (it is always kept after a violation). */
  keepDataDir?: boolean;
  /** Called after each cycle's verification. */
  onCycle?: (report: CycleReport) => void;
}

interface CycleReport {
  cycle: number;
  /** Requests sent during the load. */
  sent: number;
  /** Of them, answered with a 2xx (whole body received). */
  acknowledged: number;
  /** Of the acknowledged, those that changed the state (all but none; kept apart for clarity). */
  acknowledgedWrites: number;
  /** Answered with a refusal (410 on a user deleted meanwhile, 404 on a repeated DELETE). */
  refused: number;
  /** Without an answer: in flight at the kill. */
  inFlight: number;
  killAfterMs: number;
  /** How the kill was set off: a timer, or a file event of a compaction. */
  killTrigger: 'timer' | 'compaction';
  /**
   * At the kill, the directory held an unfinished compaction (temp file, two snapshots, or a journal newer than the
   * newest snapshot).
   */
  compactionUnfinished: boolean;
  /** Compactions the killed server reported. */
  compactions: number;
  /** From `node bin/users-server.js` to its `listening on` line. */
  restartMs: number;
  /** Bytes the restarted server reported dropping from a journal's tail. */
  droppedBytes: number;
  /** Leftover files the restarted server reported removing. */
  leftoversRemoved: number;
  users: number;
  checks: number;
  violations: number;
}

export interface CrashSummary {
  cycles: number;
  sent: number;
  acknowledged: number;
  acknowledgedWrites: number;
  inFlight: number;
  checks: number;
  restartMs: number[];
  droppedBytes: number;
  /** Restarts that reported dropping bytes. */
  drops: number;
  compactions: number;
  killsOnCompaction: number;
  compactionsUnfinishedAtKill: number;
  leftoversRemoved: number;
  violations: string[];
  dataDir: string;
  seed: number;
  elapsedMs: number;
}

const LISTENING_TIMEOUT_MS = 20_000;
const REQUEST_TIMEOUT_MS = 15_000;
const ALIASES = 48;
/** A reservation this close to its expiry is left alone: the server's clock decides, not ours. */
const RESERVATION_MARGIN_MS = 10_000;
const MAX_VIOLATIONS = 50;

// ---------------------------------------------------------------- the server process

interface ServerProcess {
  child: ChildProcess;
  url: string;
  startMs: number;
  /** The data directory's names at the moment `listening on` was read, before any request. */
  filesAtStart: string[];
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** The environment without USERS_* variables (so none leaks in), with the admin password. */
function serverEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!k.startsWith('USERS_') && k !== 'NODE_TEST_CONTEXT') env[k] = v;
  env.USERS_ADMIN_PASSWORD = ADMIN_PASSWORD;
  // Logins are not what a crash tests: the cheapest hashing, and /users open.
  env.USERS_PASSWORD_COST = '1';
  env.USERS_REQUIRE_SESSION = 'none';
  return env;
}

/** Starts `node bin/users-server.js` on `dir` and waits for its `listening on` line. */
function launchServer(dir: string, extraArgs: readonly string[] = [], bin = BIN): Promise<ServerProcess> {
  const started = performance.now();
  // Its 64 writing clients all come from 127.0.0.1: no per-client connection limit.
  const args = [
    bin,
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--data',
    dir,
    '--store',
    'journal',
    '--max-connections-per-client',
    '0',
    ...extraArgs,
  ];
  const child = spawn(process.execPath, args, { cwd: dir, env: serverEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  track(child);
  let out = '';
  let err = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no "listening on" line within ${LISTENING_TIMEOUT_MS} ms; stderr: ${err.trim()}`));
    }, LISTENING_TIMEOUT_MS);
    child.stdout!.setEncoding('utf8').on('data', (s: string) => {
      if (out.includes('\n')) return;
      out += s;
      const line = out.split('\n')[0]!;
      if (!out.includes('\n')) return;
      // Before any request: nothing has been committed, so no compaction can have begun.
      const filesAtStart = readdirSync(dir);
      const startMs = performance.now() - started;
      clearTimeout(timer);
      const m = /^listening on (http:\/\/\S+)$/.exec(line);
      if (m === null) {
        child.kill('SIGKILL');
        reject(new Error(`unexpected first line on stdout: ${JSON.stringify(line)}`));
        return;
      }
      resolve({ child, url: m[1]!, startMs, filesAtStart, stderr: () => err, exited });
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (code ${code}, signal ${signal}) before listening; stderr: ${err.trim()}`));
    });
  });
}

async function killHard(server: ServerProcess): Promise<void> {
  server.child.kill('SIGKILL');
  await server.exited;
}

// ---------------------------------------------------------------- HTTP

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One request; resolves only once the whole body has arrived (that is the acknowledgement). */
function exchange(
  agent: Agent,
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Answer> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, path, method, headers, agent, timeout: REQUEST_TIMEOUT_MS }, (res) => {
      const chunks: Buffer[] = [];
      let ended = false;
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        ended = true;
        resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', reject);
      res.on('close', () => {
        if (!ended) reject(new Error('the connection closed in the middle of the response'));
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

const JSON_HEADERS = { 'content-type': 'application/json' };

async function mapLimit<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

// ---------------------------------------------------------------- the model

type OpKind = 'alias-put' | 'id-put' | 'reserved-put' | 'delete' | 'reserve' | 'new' | 'new-key';

/** One request of the workload and what came back. */
interface Op {
  kind: OpKind;
  /** The unique `name` of a written user: which write a stored value came from. */
  tag?: string;
  body?: Record<string, unknown>;
  bodyText?: string;
  alias?: string;
  /** The target id (known when sent for id-put, reserved-put, delete; from the answer otherwise). */
  id?: number;
  key?: string;
  /** Logical times: `sent` before the request left, `acked` after its answer had fully arrived. */
  sent: number;
  acked?: number;
  status?: number;
  text?: string;
  location?: string;
  /** For reserved-put: the reservation's expiry. */
  expiresAt?: number;
}

/** The requests of one server life, indexed. */
class Life {
  readonly ops: Op[] = [];
  readonly byTag = new Map<string, Op>();
  readonly byId = new Map<number, Op[]>();

  add(op: Op): void {
    this.ops.push(op);
    if (op.tag !== undefined) this.byTag.set(op.tag, op);
    if (op.id !== undefined) this.index(op, op.id);
  }

  index(op: Op, id: number): void {
    op.id = id;
    const list = this.byId.get(id);
    if (list === undefined) this.byId.set(id, [op]);
    else if (!list.includes(op)) list.push(op);
  }
}

/** A put or delete that may have changed the state: acknowledged with a 2xx, or never answered. */
function mayHaveApplied(op: Op): boolean {
  return op.acked === undefined || (op.status! >= 200 && op.status! < 300);
}

function isAcked2xx(op: Op): boolean {
  return op.acked !== undefined && op.status! >= 200 && op.status! < 300;
}

function representation(body: Record<string, unknown>, id: number): string {
  return JSON.stringify(Object.assign({}, body, { id }));
}

/** mulberry32: a small seeded generator, so a run's choices can be replayed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NOTE_CHARS = ['a', 'b', 'z', ' ', 'é', '€', '𝄞', '"', '\\', '\u2028', 'ß', '7'];

// ---------------------------------------------------------------- the harness

/** Runs `cycles` load-kill-restart-verify cycles on a fresh data directory. */
export async function runCrashCycles(options: CrashOptions): Promise<CrashSummary> {
  const harness = new Harness(options);
  return harness.run();
}

class Harness {
  private readonly clients: number;
  private readonly killAfter: [number, number];
  private readonly serverArgs: string[];
  private readonly targetUsers: number;
  private readonly random: () => number;
  readonly seed: number;
  private readonly dir: string;
  private tick = 0;
  private checks = 0;
  private cycle = 0;
  readonly violations: string[] = [];

  // The state as last verified, and what is known across lives.
  private baseline = new Map<number, { json: string; alias: string | undefined }>();
  private readonly aliases: string[] = Array.from({ length: ALIASES }, (_, i) => `crash-${i}`);
  /** Acknowledged, unconsumed reservations: id -> expiresAt (ms). */
  private readonly reservations = new Map<number, number>();
  /** Acknowledged deletes: id -> logical time of the answer. */
  private readonly deleted = new Map<number, number>();
  /** Every id seen issued in an acknowledgement -> what issued it (an Idempotency-Key replays its id). */
  private readonly issued = new Map<number, string>();
  private maxAckedId = 0;
  /** Every id issued in this life must be above it. */
  private floorId = 0;
  private readonly ackedKeyed: Op[] = [];
  /** Ids believed alive, for the workload's choices (a swap-remove list). */
  private live: number[] = [];
  private livePos = new Map<number, number>();

  constructor(private readonly options: CrashOptions) {
    this.clients = options.clients ?? 64;
    this.killAfter = options.killAfterMs ?? [50, 400];
    this.serverArgs = options.serverArgs ?? [];
    this.targetUsers = options.targetUsers ?? 400;
    this.seed = options.seed ?? Math.floor(Math.random() * 2 ** 31);
    this.random = rng(this.seed);
    this.dir = mkdtempSync(join(tmpdir(), 'users-server-crash-'));
  }

  private check(condition: boolean, message: () => string): boolean {
    this.checks++;
    if (!condition && this.violations.length < MAX_VIOLATIONS)
      this.violations.push(`cycle ${this.cycle}: ${message()}`);
    return condition;
  }

  private pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.random() * items.length)]!;
  }

  private addLive(id: number): void {
    if (this.livePos.has(id)) return;
    this.livePos.set(id, this.live.length);
    this.live.push(id);
  }

  private removeLive(id: number): void {
    const at = this.livePos.get(id);
    if (at === undefined) return;
    const last = this.live.pop()!;
    this.livePos.delete(id);
    if (last !== id) {
      this.live[at] = last;
      this.livePos.set(last, at);
    }
  }

  private userBody(tag: string): Record<string, unknown> {
    let note = '';
    const length = Math.floor(this.random() * 120);
    for (let i = 0; i < length; i++) note += this.pick(NOTE_CHARS);
    return { name: tag, note, n: Math.floor(this.random() * 1e6) };
  }

  /**
   * An id's issuance seen in an acknowledgement: once only, and above everything acknowledged or stored before this
   * life.
   */
  private issue(id: number, source: string, replay: boolean): void {
    const before = this.issued.get(id);
    this.check(
      before === undefined || before === source,
      () => `id ${id} was issued twice: by ${before} and by ${source}`,
    );
    if (!replay)
      this.check(
        id > this.floorId,
        () =>
          `id ${id} (${source}) was issued after a restart although ids up to ${this.floorId} had been acknowledged or stored before it`,
      );
    this.issued.set(id, source);
    if (id > this.maxAckedId) this.maxAckedId = id;
  }

  async run(): Promise<CrashSummary> {
    const started = performance.now();
    const summary: CrashSummary = {
      cycles: 0,
      sent: 0,
      acknowledged: 0,
      acknowledgedWrites: 0,
      inFlight: 0,
      checks: 0,
      restartMs: [],
      droppedBytes: 0,
      drops: 0,
      compactions: 0,
      killsOnCompaction: 0,
      compactionsUnfinishedAtKill: 0,
      leftoversRemoved: 0,
      violations: this.violations,
      dataDir: this.dir,
      seed: this.seed,
      elapsedMs: 0,
    };
    let server: ServerProcess | undefined;
    try {
      server = await launchServer(this.dir, this.serverArgs, this.options.bin);
      this.checkFiles(server.filesAtStart);
      for (this.cycle = 1; this.cycle <= this.options.cycles; this.cycle++) {
        const checksBefore = this.checks;
        const violationsBefore = this.violations.length;
        const life = new Life();
        const onCompaction = this.random() < (this.options.killOnCompaction ?? 0);
        const load = await this.load(server, life, onCompaction);
        const compactions = countMatches(server.stderr(), /compacted a \d+-byte journal/g);
        const atKill = readdirSync(this.dir);
        const unfinished = compactionUnfinished(atKill);

        let restarted: ServerProcess;
        try {
          restarted = await launchServer(this.dir, this.serverArgs, this.options.bin);
        } catch (error) {
          server = undefined;
          this.check(
            false,
            () =>
              `the server did not start again after the kill: ${(error as Error).message}; files at the kill: ${atKill.join(' ')}`,
          );
          break;
        }
        server = restarted;
        this.checkFiles(server.filesAtStart);
        const startErr = server.stderr();
        const dropped = [...startErr.matchAll(/dropped (\d+) bytes at offset/g)].reduce((n, m) => n + Number(m[1]), 0);
        const leftovers = countMatches(startErr, /left over from an interrupted compaction/g);
        const users = await this.verify(server, life);

        const sent = life.ops.length;
        const acknowledged = life.ops.filter(isAcked2xx).length;
        const refused = life.ops.filter((op) => op.acked !== undefined && !isAcked2xx(op)).length;
        const inFlight = life.ops.filter((op) => op.acked === undefined).length;
        const report: CycleReport = {
          cycle: this.cycle,
          sent,
          acknowledged,
          acknowledgedWrites: life.ops.filter((op) => isAcked2xx(op) && op.kind !== 'reserve').length,
          refused,
          inFlight,
          killAfterMs: load.killAfterMs,
          killTrigger: load.trigger,
          compactionUnfinished: unfinished,
          compactions,
          restartMs: server.startMs,
          droppedBytes: dropped,
          leftoversRemoved: leftovers,
          users,
          checks: this.checks - checksBefore,
          violations: this.violations.length - violationsBefore,
        };
        summary.cycles++;
        summary.sent += sent;
        summary.acknowledged += acknowledged;
        summary.acknowledgedWrites += report.acknowledgedWrites;
        summary.inFlight += inFlight;
        summary.restartMs.push(server.startMs);
        summary.droppedBytes += dropped;
        if (/dropped \d+ bytes/.test(startErr)) summary.drops++;
        summary.compactions += compactions;
        if (load.trigger === 'compaction') summary.killsOnCompaction++;
        if (unfinished) summary.compactionsUnfinishedAtKill++;
        summary.leftoversRemoved += leftovers;
        this.options.onCycle?.(report);
        if (this.violations.length > 0) break;
      }
      if (server !== undefined) {
        // A graceful stop at the end: the store flushes and the process exits 0.
        server.child.kill('SIGTERM');
        const { code } = await server.exited;
        this.check(
          code === 0,
          () => `after SIGTERM the server exited with ${code}; stderr: ${server!.stderr().trim()}`,
        );
        server = undefined;
      }
    } finally {
      if (server !== undefined) await killHard(server);
    }
    summary.checks = this.checks;
    summary.elapsedMs = performance.now() - started;
    if (this.violations.length === 0 && !this.options.keepDataDir) rmSync(this.dir, { recursive: true, force: true });
    return summary;
  }

  /** The data directory as a server starts listening: one consistent generation set, nothing left over. */
  private checkFiles(files: readonly string[]): void {
    const journals: number[] = [];
    const snapshots: number[] = [];
    for (const name of files) {
      const m = /^(journal|snapshot)-(\d{8})$/.exec(name);
      if (m) (m[1] === 'journal' ? journals : snapshots).push(Number(m[2]));
      else
        this.check(
          ['lock', 'secret', 'admin-password', 'admin-identity'].includes(name),
          () => `unexpected file ${name} in the data directory after a start (files: ${files.join(' ')})`,
        );
    }
    journals.sort((a, b) => a - b);
    this.check(snapshots.length <= 1, () => `${snapshots.length} snapshots after a start (files: ${files.join(' ')})`);
    const first = snapshots[0] ?? 1;
    const contiguous = journals.length > 0 && journals.every((g, i) => g === first + i);
    this.check(
      contiguous,
      () =>
        `the journals do not continue the snapshot from generation ${first} without a gap (files: ${files.join(' ')})`,
    );
  }

  // ------------------------------------------------------------ load

  private async load(
    server: ServerProcess,
    life: Life,
    onCompaction: boolean,
  ): Promise<{ killAfterMs: number; trigger: 'timer' | 'compaction' }> {
    const agent = new Agent({ keepAlive: true, maxSockets: this.clients });
    let stopped = false;
    const [low, high] = this.killAfter;
    const delay = low + this.random() * (high - low);
    const loadStarted = performance.now();
    let trigger: 'timer' | 'compaction' = 'timer';
    let watcher: FSWatcher | undefined;
    let timer: NodeJS.Timeout | undefined;
    let killAfterMs = 0;
    let killed!: () => void;
    const killedP = new Promise<void>((resolve) => (killed = resolve));
    const kill = () => {
      if (stopped) return;
      stopped = true;
      killAfterMs = performance.now() - loadStarted;
      clearTimeout(timer);
      watcher?.close();
      server.child.kill('SIGKILL');
      killed();
    };
    if (onCompaction) {
      // Kill on the Nth file event of a compaction (journal created, temp
      // written, renamed, old files removed), a few ms late at most, so the
      // kills land on different steps of it. A timer is the fallback.
      let skip = Math.floor(this.random() * 6);
      const lateMs = this.random() * 3;
      watcher = watch(this.dir, (event, name) => {
        if (event !== 'rename' || name === null || !/^(journal|snapshot)-\d{8}(\.tmp)?$/.test(name) || stopped) return;
        if (skip-- > 0) return;
        trigger = 'compaction';
        setTimeout(kill, lateMs);
      });
    }
    // The kill's clock starts at the first answer, so that a slow start on a busy machine still leaves writes
    // acknowledged before it.
    let answered = false;
    const firstAnswer = () => {
      if (answered || stopped) return;
      answered = true;
      timer = setTimeout(kill, onCompaction ? Math.max(delay, 1500) : delay);
    };

    const client = async (c: number) => {
      let seq = 0;
      while (!stopped) {
        const op = this.chooseOp(c, seq++);
        try {
          await this.perform(agent, server.url, life, op);
          firstAnswer();
        } catch (error) {
          // No answer: the op stays unacknowledged. Before the kill, that is the server failing.
          if (!stopped) {
            this.check(
              false,
              () => `${op.kind} ${op.tag ?? op.id ?? ''} failed before the kill: ${(error as Error).message}`,
            );
            await killedP;
          }
        }
      }
    };
    await Promise.all(Array.from({ length: this.clients }, (_, c) => client(c)));
    await server.exited;
    agent.destroy();
    return { killAfterMs, trigger };
  }

  private chooseOp(c: number, seq: number): Op {
    const tag = `L${this.cycle}c${c}n${seq}`;
    const crowded = this.live.length > this.targetUsers;
    const weights: [OpKind, number][] = [
      ['alias-put', 24],
      ['id-put', this.live.length > 0 ? 20 : 0],
      ['delete', this.live.length > 0 ? (crowded ? 30 : 8) : 0],
      ['reserve', 8],
      ['reserved-put', this.reservations.size > 0 ? 10 : 0],
      ['new', crowded ? 4 : 10],
      ['new-key', crowded ? 4 : 10],
    ];
    let r = this.random() * weights.reduce((n, [, w]) => n + w, 0);
    let kind: OpKind = 'alias-put';
    for (const [k, w] of weights) {
      if (r < w) {
        kind = k;
        break;
      }
      r -= w;
    }
    const op: Op = { kind, sent: -1 };
    switch (kind) {
      case 'alias-put':
        op.alias = this.pick(this.aliases);
        break;
      case 'id-put':
      case 'delete':
        op.id = this.pick(this.live);
        break;
      case 'reserved-put': {
        const [id, expiresAt] = this.reservations.entries().next().value!;
        this.reservations.delete(id);
        if (expiresAt - Date.now() < RESERVATION_MARGIN_MS) return this.chooseOp(c, seq);
        op.id = id;
        op.expiresAt = expiresAt;
        break;
      }
      case 'new-key':
        op.key = `crash-${this.seed}-${tag}`;
        break;
    }
    if (kind !== 'delete' && kind !== 'reserve') {
      op.tag = tag;
      op.body = this.userBody(tag);
      op.bodyText = JSON.stringify(op.body);
    }
    return op;
  }

  private async perform(agent: Agent, url: string, life: Life, op: Op): Promise<void> {
    let method = 'PUT';
    let path: string;
    let headers: Record<string, string> = JSON_HEADERS;
    switch (op.kind) {
      case 'alias-put':
        path = `/users/${op.alias}`;
        break;
      case 'id-put':
      case 'reserved-put':
        path = `/users/${op.id}`;
        break;
      case 'delete':
        method = 'DELETE';
        path = `/users/${op.id}`;
        headers = {};
        break;
      case 'reserve':
        method = 'POST';
        path = '/reservations';
        headers = {};
        break;
      case 'new':
        method = 'POST';
        path = '/users/new';
        break;
      case 'new-key':
        method = 'POST';
        path = '/users/new';
        headers = { ...JSON_HEADERS, 'idempotency-key': op.key! };
        break;
    }
    op.sent = this.tick++;
    life.add(op);
    const answer = await exchange(agent, url, method, path, headers, op.bodyText);
    op.acked = this.tick++;
    op.status = answer.status;
    op.text = answer.text;
    const location = answer.headers.location;
    op.location = typeof location === 'string' ? location : undefined;
    this.recordAnswer(life, op, `${method} ${path}`, false);
  }

  /** What an answer tells; `verifying` marks the requests of a verification (sequential, no kill). */
  private recordAnswer(life: Life, op: Op, what: string, verifying: boolean): void {
    const status = op.status!;
    const unexpected = () => `${what} answered ${status}: ${op.text!.slice(0, 300)}`;
    switch (op.kind) {
      case 'alias-put': {
        if (!this.check(status === 200 || status === 201, unexpected)) return;
        const id = (JSON.parse(op.text!) as { id: number }).id;
        life.index(op, id);
        this.check(
          op.text === representation(op.body!, id),
          () => `${what} answered ${op.text} for the body ${op.bodyText}`,
        );
        const deletedAt = this.deleted.get(id);
        this.check(
          deletedAt === undefined || deletedAt > op.sent,
          () =>
            `${what} answered ${status} with id ${id}, a user whose DELETE had been acknowledged before it was sent`,
        );
        if (status === 201) {
          this.check(op.location === `/users/${id}`, () => `${what} created ${id} with Location ${op.location}`);
          this.issue(id, `PUT ${op.tag}`, false);
        }
        this.addLive(id);
        return;
      }
      case 'id-put': {
        const id = op.id!;
        if (status === 410) {
          this.removeLive(id);
          return;
        }
        if (!this.check(status === 200, unexpected)) return;
        this.check(
          op.text === representation(op.body!, id),
          () => `${what} answered ${op.text} for the body ${op.bodyText}`,
        );
        const deletedAt = this.deleted.get(id);
        this.check(
          deletedAt === undefined || deletedAt > op.sent,
          () => `${what} answered 200 although the DELETE of ${id} had been acknowledged before it was sent`,
        );
        return;
      }
      case 'reserved-put': {
        const id = op.id!;
        this.check(
          status === 201,
          () =>
            `${what} under the acknowledged reservation of ${id} (expiring ${new Date(op.expiresAt!).toISOString()}) ${unexpected()}`,
        );
        if (status === 201) {
          this.check(
            op.text === representation(op.body!, id),
            () => `${what} answered ${op.text} for the body ${op.bodyText}`,
          );
          this.addLive(id);
        }
        return;
      }
      case 'delete': {
        const id = op.id!;
        this.removeLive(id);
        if (status === 404) return;
        if (!this.check(status === 204, unexpected)) return;
        if (!this.deleted.has(id)) this.deleted.set(id, op.acked!);
        return;
      }
      case 'reserve': {
        if (!this.check(status === 201, unexpected)) return;
        const body = JSON.parse(op.text!) as { id: number; expiresAt: string };
        life.index(op, body.id);
        this.check(
          op.location === `/users/${body.id}`,
          () => `${what} reserved ${body.id} with Location ${op.location}`,
        );
        this.issue(body.id, `reservation ${op.sent}`, false);
        const expiresAt = Date.parse(body.expiresAt);
        this.check(Number.isFinite(expiresAt), () => `${what} answered expiresAt ${body.expiresAt}`);
        if (!verifying) this.reservations.set(body.id, expiresAt);
        return;
      }
      case 'new':
      case 'new-key': {
        if (!this.check(status === 201, unexpected)) return;
        const replayed = op.kind === 'new-key' && (op as Op & { replayed?: boolean }).replayed === true;
        const id = (JSON.parse(op.text!) as { id: number }).id;
        life.index(op, id);
        this.check(
          op.text === representation(op.body!, id),
          () => `${what} answered ${op.text} for the body ${op.bodyText}`,
        );
        this.check(op.location === `/users/${id}`, () => `${what} created ${id} with Location ${op.location}`);
        this.issue(id, op.key !== undefined ? `Idempotency-Key ${op.key}` : `POST ${op.tag}`, replayed);
        if (op.kind === 'new-key') this.ackedKeyed.push(op);
        if (!replayed) this.addLive(id);
        return;
      }
    }
  }

  // ------------------------------------------------------------ verification

  /** Checks the restarted server against everything the killed one acknowledged; returns the user count. */
  private async verify(server: ServerProcess, prev: Life): Promise<number> {
    const agent = new Agent({ keepAlive: true, maxSockets: 16 });
    const url = server.url;
    const get = (path: string) => exchange(agent, url, 'GET', path, {});
    try {
      // Every id stored or acknowledged before this start is below the next one issued.
      const stored = await this.readAll(get);
      this.floorId = this.maxAckedId;
      for (const id of stored.keys()) if (id > this.floorId) this.floorId = id;

      // 1. Each stored user: a value some client sent, at the right id, not overwritten by a later acknowledged write.
      const expectedAlias = new Map<number, string>();
      const tags = new Map<string, number>();
      for (const [id, json] of stored) {
        this.check(!this.deleted.has(id), () => `user ${id} is back after its DELETE was acknowledged: ${json}`);
        const user = JSON.parse(json) as { name: string };
        const other = tags.get(user.name);
        this.check(other === undefined, () => `users ${other} and ${id} both hold the value of write ${user.name}`);
        tags.set(user.name, id);
        const base = this.baseline.get(id);
        let source: Op | 'baseline';
        if (base !== undefined && base.json === json) source = 'baseline';
        else {
          const op = prev.byTag.get(user.name);
          if (
            !this.check(
              op !== undefined,
              () => `user ${id} holds ${json}, which is neither its value before the kill nor a value written since`,
            )
          )
            continue;
          source = op!;
          this.check(
            mayHaveApplied(op!),
            () => `user ${id} holds ${json}, written by a request that was refused with ${op!.status}`,
          );
          this.check(
            op!.id === undefined || op!.id === id,
            () => `user ${id} holds ${json}, written to user ${op!.id}`,
          );
          this.check(
            json === representation(op!.body!, id),
            () => `user ${id} holds ${json}, but the write sent ${op!.bodyText}`,
          );
          if (op!.kind === 'alias-put') expectedAlias.set(id, op!.alias!);
        }
        // Acknowledged writes known to come after the source: the source cannot be the last.
        const sourceAcked = source === 'baseline' ? -1 : source.acked;
        if (sourceAcked !== undefined) {
          for (const later of prev.byId.get(id) ?? []) {
            if (later === source || !isAcked2xx(later) || later.kind === 'reserve' || later.sent < sourceAcked)
              continue;
            this.check(
              false,
              () =>
                `user ${id} holds ${json}${source === 'baseline' ? ' (its value before the kill)' : ''}, but a later ${later.kind} (${later.tag ?? 'delete'}) was acknowledged`,
            );
          }
        }
        for (const op of prev.byId.get(id) ?? [])
          if (op.kind === 'alias-put' && isAcked2xx(op)) this.agreeAlias(expectedAlias, id, op.alias!);
        if (base?.alias !== undefined) this.agreeAlias(expectedAlias, id, base.alias);
      }

      // 2. Each user that must exist: stored before, or created or written with an acknowledgement, and not possibly
      // deleted.
      const mustExist = new Map<number, string>();
      for (const id of this.baseline.keys()) mustExist.set(id, 'stored before the kill');
      for (const op of prev.ops) {
        if (op.id !== undefined && isAcked2xx(op) && op.kind !== 'delete' && op.kind !== 'reserve')
          mustExist.set(op.id, `acknowledged ${op.kind} ${op.tag}`);
      }
      for (const [id, why] of mustExist) {
        if (stored.has(id)) continue;
        const deletable =
          this.deleted.has(id) || (prev.byId.get(id) ?? []).some((op) => op.kind === 'delete' && mayHaveApplied(op));
        this.check(deletable, () => `user ${id} is missing after the restart (${why}), and no DELETE of it was sent`);
      }
      for (const id of this.reservations.keys()) {
        this.check(
          !stored.has(id),
          () => `id ${id} holds a user although its reservation was never used: ${stored.get(id)}`,
        );
      }

      // 3. Aliases: a stored user created through an alias is reached through it.
      const aliasOf = new Map<number, string>();
      await mapLimit(this.aliases, 16, async (alias) => {
        const answer = await get(`/users/${alias}`);
        if (answer.status === 404) return;
        if (!this.check(answer.status === 200, () => `GET /users/${alias} answered ${answer.status}: ${answer.text}`))
          return;
        const id = (JSON.parse(answer.text) as { id: number }).id;
        aliasOf.set(id, alias);
        this.check(
          stored.get(id) === answer.text,
          () => `GET /users/${alias} answered ${answer.text}, the listing holds ${stored.get(id)} for ${id}`,
        );
        const expected = expectedAlias.get(id);
        this.check(
          expected === undefined || expected === alias,
          () => `alias ${alias} resolves to ${id}, which was created through ${expected}`,
        );
      });
      for (const [id, alias] of expectedAlias) {
        if (!stored.has(id)) continue;
        this.check(
          aliasOf.get(id) === alias,
          () => `user ${id} was created through alias ${alias}, but GET /users/${alias} does not answer it`,
        );
      }

      const writes: Op[] = [];
      const life = new Life();
      // 4. Deleted users stay deleted, and their ids stay issued (PUT: 410, not 404 nor 201).
      const deletedNow = prev.ops.filter((op) => op.kind === 'delete' && isAcked2xx(op)).map((op) => op.id!);
      const olderDeleted = this.sample(
        [...this.deleted.keys()].filter((id) => !deletedNow.includes(id)),
        8,
      );
      await mapLimit([...deletedNow, ...olderDeleted], 16, async (id) => {
        const answer = await get(`/users/${id}`);
        this.check(
          answer.status === 404,
          () => `GET /users/${id} answered ${answer.status} after its DELETE was acknowledged: ${answer.text}`,
        );
      });
      await mapLimit(this.sample(deletedNow, 8), 8, async (id) => {
        const answer = await exchange(
          agent,
          url,
          'PUT',
          `/users/${id}`,
          JSON_HEADERS,
          JSON.stringify({ name: `L${this.cycle}-deleted-${id}` }),
        );
        this.check(
          answer.status === 410 && answer.text.includes('problem/gone'),
          () =>
            `PUT /users/${id} after its acknowledged DELETE answered ${answer.status} (expected 410 gone): ${answer.text}`,
        );
      });

      // 5. Idempotency keys survive: acknowledged ones replay; those in flight replay or start afresh, never both.
      const lifeStart = prev.ops[0]?.sent ?? this.tick;
      const replays = [
        ...prev.ops.filter((op) => op.kind === 'new-key' && isAcked2xx(op)),
        ...this.sample(
          this.ackedKeyed.filter((op) => op.sent < lifeStart),
          8,
        ),
      ];
      await mapLimit(replays, 16, async (op) => {
        const answer = await exchange(
          agent,
          url,
          'POST',
          '/users/new',
          { ...JSON_HEADERS, 'idempotency-key': op.key! },
          op.bodyText,
        );
        this.check(
          answer.status === op.status &&
            answer.text === op.text &&
            answer.headers.location === op.location &&
            answer.headers['idempotent-replayed'] === 'true',
          () =>
            `the acknowledged Idempotency-Key ${op.key} (${op.status} ${op.text}) answered after the restart ${answer.status} ${answer.text} (Idempotent-Replayed: ${answer.headers['idempotent-replayed']})`,
        );
      });
      const retried = prev.ops.filter((op) => op.kind === 'new-key' && op.acked === undefined);
      await mapLimit(retried, 16, async (first) => {
        const retry: Op & { replayed?: boolean } = {
          kind: 'new-key',
          tag: first.tag!,
          body: first.body!,
          bodyText: first.bodyText!,
          key: first.key!,
          sent: this.tick++,
        };
        const answer = await exchange(
          agent,
          url,
          'POST',
          '/users/new',
          { ...JSON_HEADERS, 'idempotency-key': first.key! },
          first.bodyText,
        );
        Object.assign(retry, {
          acked: this.tick++,
          status: answer.status,
          text: answer.text,
          location: answer.headers.location,
        });
        retry.replayed = answer.headers['idempotent-replayed'] === 'true';
        const id = answer.status === 201 ? (JSON.parse(answer.text) as { id: number }).id : undefined;
        if (retry.replayed) {
          this.check(
            id !== undefined && stored.get(id) === answer.text,
            () =>
              `Idempotency-Key ${first.key} replayed ${answer.text}, but the listing holds ${id === undefined ? 'nothing' : stored.get(id)} there`,
          );
        } else {
          this.check(
            !tags.has(first.tag!),
            () =>
              `Idempotency-Key ${first.key} created a new user, but its first attempt's user ${tags.get(first.tag!)} is stored: a user without its key`,
          );
        }
        this.recordAnswer(life, retry, `retried POST /users/new (Idempotency-Key ${first.key})`, true);
        if (!retry.replayed && answer.status === 201) writes.push(retry);
      });

      // 6. Reservations survive: a PUT in flight under one either created its user or left it reserved.
      const uncertain = prev.ops.filter(
        (op) => op.kind === 'reserved-put' && op.acked === undefined && !stored.has(op.id!),
      );
      for (const op of uncertain) this.reservations.set(op.id!, op.expiresAt!);
      for (const op of prev.ops) {
        if (op.kind === 'reserved-put' && op.acked === undefined && stored.has(op.id!)) {
          this.check(
            tags.get(op.tag!) === op.id,
            () => `reserved id ${op.id} holds ${stored.get(op.id!)}, but the only PUT under it sent ${op.bodyText}`,
          );
        }
      }
      const now = Date.now();
      const usable = [...this.reservations].filter(([, expiresAt]) => expiresAt - now > RESERVATION_MARGIN_MS);
      const probes = [...usable.filter(([id]) => uncertain.some((op) => op.id === id)), ...this.sample(usable, 16)];
      const probed = new Set<number>();
      await mapLimit(probes, 8, async ([id, expiresAt]) => {
        if (probed.has(id)) return;
        probed.add(id);
        this.reservations.delete(id);
        const tag = `L${this.cycle}v${id}`;
        const op: Op = { kind: 'reserved-put', tag, body: this.userBody(tag), id, expiresAt, sent: this.tick++ };
        op.bodyText = JSON.stringify(op.body);
        const answer = await exchange(agent, url, 'PUT', `/users/${id}`, JSON_HEADERS, op.bodyText);
        Object.assign(op, { acked: this.tick++, status: answer.status, text: answer.text });
        this.recordAnswer(life, op, `PUT /users/${id} after the restart`, true);
        if (answer.status === 201) writes.push(op);
      });

      // The verified state is the next cycle's starting point.
      this.baseline = new Map();
      for (const [id, json] of stored) this.baseline.set(id, { json, alias: aliasOf.get(id) });
      for (const op of writes) this.baseline.set(op.id!, { json: op.text!, alias: undefined });
      this.live = [];
      this.livePos = new Map();
      for (const id of this.baseline.keys()) this.addLive(id);
      return this.baseline.size;
    } catch (error) {
      this.check(false, () => `verification failed: ${(error as Error).message}`);
      return 0;
    } finally {
      agent.destroy();
    }
  }

  private agreeAlias(expected: Map<number, string>, id: number, alias: string): void {
    const known = expected.get(id);
    this.check(
      known === undefined || known === alias,
      () => `user ${id} was written through two aliases: ${known} and ${alias}`,
    );
    expected.set(id, alias);
  }

  private sample<T>(items: readonly T[], n: number): T[] {
    const copy = [...items];
    const out: T[] = [];
    while (out.length < n && copy.length > 0) out.push(copy.splice(Math.floor(this.random() * copy.length), 1)[0]!);
    return out;
  }

  /** Every stored user, through the paged listing. */
  private async readAll(get: (path: string) => Promise<Answer>): Promise<Map<number, string>> {
    const users = new Map<number, string>();
    let path: string | null = '/users?limit=1000';
    let last = 0;
    while (path !== null) {
      const answer = await get(path);
      if (answer.status !== 200) throw new Error(`GET ${path} answered ${answer.status}: ${answer.text}`);
      const page = JSON.parse(answer.text) as { items: { id: number }[]; next: string | null };
      for (const item of page.items) {
        this.check(item.id > last, () => `the listing is not in ascending id order: ${item.id} after ${last}`);
        last = item.id;
        users.set(item.id, JSON.stringify(item));
      }
      path = page.next;
    }
    return users;
  }
}

function countMatches(text: string, pattern: RegExp): number {
  return [...text.matchAll(pattern)].length;
}

/** A compaction was under way: a temp snapshot, two snapshots, or a journal newer than the newest snapshot. */
function compactionUnfinished(files: readonly string[]): boolean {
  let newestJournal = 0;
  let newestSnapshot = 1;
  let snapshots = 0;
  for (const name of files) {
    if (name.endsWith('.tmp')) return true;
    const m = /^(journal|snapshot)-(\d{8})$/.exec(name);
    if (!m) continue;
    if (m[1] === 'journal') newestJournal = Math.max(newestJournal, Number(m[2]));
    else {
      snapshots++;
      newestSnapshot = Math.max(newestSnapshot, Number(m[2]));
    }
  }
  return snapshots > 1 || newestJournal > newestSnapshot;
}

/** Median and a quantile of a list of numbers. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}
