import { FSYNC_BUCKETS, Histogram } from '../../ops/histogram.js';
import { uniqueKeysOf, type FieldDeclaration } from '../../users/declared-fields.js';
import { LAST_KEY, type KeyRange } from '../../users/index-key.js';
import type { UserSchema } from '../../users/user-schema.js';
import type { IndexEntry } from '../index-find.js';
import {
  decideCreate,
  decideDelete,
  decidePut,
  directReplace,
  scopedKey,
  tooManyReservations,
  type DeleteRequest,
  type DirectReplace,
  type IdempotencyKey,
  type IdempotentOperation,
  type PutRequest,
  type UserBody,
  type UserRef,
} from '../../users/rules.js';
import { keptRecord, replayOf, type KeyedRequest, type Replay } from '../kept-answer.js';
import {
  DEFAULT_CHANGES_RETENTION_MS,
  type ApiTokenRecord,
  type Change,
  type ChangePage,
  type Created,
  type CreateOutcome,
  type CreateRequest,
  type DeleteOutcome,
  type Lookup,
  type PutOutcome,
  type Readiness,
  type Reserved,
  type ReserveOutcome,
  type ReserveRequest,
  type Revocation,
  type Store,
  type StoreStats,
  type FoundPage,
  type UserPage,
  type UserQuery,
} from '../store.js';
import type { ScannedUser } from '../found-pages.js';
import { UserScans } from '../scan-users.js';
import { OutageLog } from './outage-log.js';
import {
  againIfDropped,
  DEFAULT_DB_POOL,
  DEFAULT_DB_TIMEOUT_SECONDS,
  isRetryable,
  replacePool,
  unavailable,
  withDeadline,
  type Sql,
} from './driver.js';
import { LoadedFacts, loadCounter, loadTarget, tokenOfRow, tokenRow, userOf, userRow, writeIssued } from './facts.js';
import {
  conflictIn,
  DeclaredFields,
  FieldsChangedError,
  hold,
  holdersOf,
  takenIn,
  writeEntries,
} from './declared-fields.js';
import { GatheredStatements } from './gathered-statements.js';
import { PostgresSettings } from './shared-settings.js';
import { inTransaction, type Commit, type Tx } from './transaction.js';

/** A key a find asks its holders of: a unique field's path and the key. */
interface HeldKey {
  readonly path: string;
  readonly key: string;
}

/** The holders of a HeldKey, with the version of the declarations they were read at. */
interface HeldUsers {
  readonly version: unknown;
  readonly users: ScannedUser[];
}

/** A row of PostgresStore.readIds: the move of an id and the user under it. */
interface IdRow {
  current_id: string | null;
  id: string | null;
  alias: string | null;
  json: string | null;
  etag: string | null;
}

/** What a GET by id finds: the user, the id it moved to, or nothing. */
function lookupOf(row: IdRow): Lookup {
  if (row.current_id !== null) return { kind: 'old-id', currentId: Number(row.current_id) };
  return row.id === null ? undefined : userOf(row as never);
}

/**
 * Text keys as the array a gathered statement compares with (`= any(...)`,
 * which PostgreSQL reads by key). They go as JSON text: an array parameter
 * depends on the driver's table of array types, loaded per pool.
 */
function anyOf(sql: Sql, keys: readonly string[]) {
  return sql`array(select jsonb_array_elements_text(${JSON.stringify(keys)}::text::jsonb))`;
}

/** A part of a statement, made by the tagged template. */
type Fragment = ReturnType<Sql['unsafe']>;

/** How often a transaction that lost a race (a unique key, a deadlock) runs again. */
const ATTEMPTS = 5;
/** The advisory lock key of the sweep: one instance at a time. */
const SWEEP_LOCK = 7_557_300_002;

/** Seconds `close` lets the pool's connections end by themselves before cutting them. */
const CLOSE_SECONDS = 0.5;

/** How often an instance with someone following the feed asks the database whether another instance made changes. */
const CHANGE_POLL_MS = 20;

/** Outcomes of a write that changed a user. */
const CHANGING_OUTCOMES = new Set(['created', 'replaced', 'moved', 'deleted']);

/** A change as its row reads. */
function changeOf(row: Record<string, unknown>): Change {
  const op = row.op as Change['op'];
  const change = { seq: Number(row.seq), at: Number(row.at), op, id: Number(row.id) };
  if (op === 'delete') return change;
  return op === 'move'
    ? { ...change, from: Number(row.from_id), json: row.json as string }
    : { ...change, json: row.json as string };
}

/**
 * The PostgreSQL store: everything the service shares lives in the
 * database, so any number of instances can serve it. Every write is one
 * transaction that serializes on what it may change (a transaction-wide
 * advisory lock on its key, the user's row, the id counter when it may
 * issue an id), reads the facts, decides with users/rules.ts, and writes:
 * never a read in one transaction and a write in another. A replace by id
 * is first tried as a conditional UPDATE, gathered with the replaces that
 * arrive meanwhile into one statement and one transaction. An outcome
 * arrives once its transaction committed, so `settled()` has nothing to wait for.
 */
export class PostgresStore implements Store {
  private readonly noSyncs = new Histogram(FSYNC_BUCKETS);
  readonly shared: PostgresSettings;

  /**
   * What every request of a kind asks, gathered into one statement per kind
   * while the previous is under way: GETs by id (with the move check of a
   * PUT or DELETE by id) and replaces by id.
   */
  private readonly reads = new GatheredStatements<number, IdRow>((ids) => this.again(() => this.readIds(ids)));
  /** The unique keys finds ask (`eq` on a unique field), likewise. */
  private readonly heldKeys = new GatheredStatements<HeldKey, HeldUsers>((keys) =>
    this.again(() => this.holdersOfKeys(keys)),
  );
  private readonly replaces = new GatheredStatements<VersionedReplace, string | null | undefined>(
    (puts) => this.replaceAll(puts),
    (put) => put.id,
  );
  /** Creates without an Idempotency-Key: one transaction, one lock of the id counter, one commit for all. */
  private readonly creates = new GatheredStatements<UserBody, CreateOutcome>((bodies) => this.createAll(bodies));
  /** Reservations without an Idempotency-Key, likewise. */
  private readonly reservations = new GatheredStatements<ReserveRequest, ReserveOutcome>((requests) =>
    this.reserveAll(requests),
  );
  /** What a request's credentials need: its session's revocation, its API token. */
  private readonly revocations = new GatheredStatements<string, boolean>((ids) =>
    this.again(() => this.revokedAmong(ids)),
  );
  private readonly tokens = new GatheredStatements<string, ApiTokenRecord | undefined>((ids) =>
    this.again(() => this.tokensOf(ids)),
  );

  private readonly changeListeners = new Set<() => void>();
  /** While someone listens for changes: the poll of the head of the feed, for the changes other instances make. */
  private changePoll: NodeJS.Timeout | undefined;
  private lastSeqSeen = -1;

  /** The log's lines of an outage of the database: when it stops answering, when it answers again. */
  private readonly outage: OutageLog;
  private readonly scans: UserScans;
  /** The declared fields as this instance read them (polled; a write reads them again in its transaction). */
  private readonly fields: DeclaredFields;

  constructor(
    readonly sql: Sql,
    /** Connections in the pool: how many dropped ones a read or a transaction may meet in a row. */
    private readonly poolSize = DEFAULT_DB_POOL,
    /** `--db-timeout`: seconds a statement may take, and a stop waits for those under way. */
    private readonly timeoutSeconds = DEFAULT_DB_TIMEOUT_SECONDS,
    /** How long a change stays in the feed of changes, in ms. */
    private readonly changesRetentionMs = DEFAULT_CHANGES_RETENTION_MS,
    /** Where an outage of the database is told (the server's log), and how the database is named there. */
    outageLog: { log: (line: string) => void; database: string } = { log: () => {}, database: 'the database' },
    /** Users a filter with no sort and no count examines per request (scan-users.ts, FIND_BUDGET). */
    findBudget?: number,
  ) {
    this.fields = new DeclaredFields(sql);
    this.outage = new OutageLog(outageLog.database, async () => (await this.readiness()).ready, outageLog.log);
    const userCount = () => this.userCount();
    this.scans = new UserScans({ usersAfter: (after, limit) => this.usersAfter(after, limit), userCount }, findBudget, {
      idsInRange: (field, range) => this.idsInRange(field, range),
      holdersOfKey: (field, key) => this.holdersOfKey(field, key),
      sortedAfter: (field, descending, after, limit) => this.sortedAfter(field, descending, after, limit),
      usersOf: (ids) => this.usersOf(ids),
      userCount,
    });
    this.fields.poll();
    this.shared = new PostgresSettings(sql, this.rethrow, this.readDeadline());
  }

  /**
   * Rethrows a statement's failure as a request's: a database out of reach is a StoreUnavailableError, and its outage
   * is logged.
   */
  private readonly rethrow = (error: unknown): never => {
    this.outage.failed(error);
    throw unavailable(error);
  };

  async changesAfter(after: number, limit: number): Promise<ChangePage> {
    return this.read(async () => {
      // One statement, one snapshot: the head and the rows agree.
      const rows = await this.sql`
        select h.last_seq, h.trimmed_through, c.seq, c.at, c.op, c.id, c.from_id, c.json
        from change_head h left join lateral (select * from changes where seq > ${after} order by seq limit ${limit}) c on true
        order by c.seq`;
      const head = rows[0]!;
      const changes = rows.filter((r) => r.seq !== null).map(changeOf);
      return { changes, trimmedThrough: Number(head.trimmed_through), lastSeq: Number(head.last_seq) };
    });
  }

  onChanges(listener: () => void): () => void {
    this.changeListeners.add(listener);
    this.changePoll ??= setInterval(() => void this.pollChanges(), CHANGE_POLL_MS).unref();
    return () => {
      this.changeListeners.delete(listener);
      if (this.changeListeners.size > 0) return;
      clearInterval(this.changePoll);
      this.changePoll = undefined;
    };
  }

  /** Asks the head of the feed for its number, and tells the listeners when it moved (a change by another instance). */
  private async pollChanges(): Promise<void> {
    try {
      const [head] = await this.sql`select last_seq from change_head`;
      const seq = Number(head!.last_seq);
      if (seq !== this.lastSeqSeen) {
        this.lastSeqSeen = seq;
        this.announceChanges();
      }
    } catch {
      // The database is away: the next poll asks again.
    }
  }

  /** Tells the change listeners (after a write of this instance, or a poll that saw others'). */
  private announceChanges(): void {
    for (const listener of this.changeListeners) listener();
  }

  /** `outcome`, after telling the listeners when it changed a user. */
  private announced<T extends { kind: string }>(outcome: T): T {
    if (CHANGING_OUTCOMES.has(outcome.kind)) this.announceChanges();
    return outcome;
  }

  findUser(ref: UserRef): Promise<Lookup> {
    if (ref.kind === 'id') {
      // The hot path: the gathered read's promise, with no async frame around it.
      return this.reads.run(ref.id).then(lookupOf, this.rethrow);
    }
    return this.read(async () => {
      const [row] = await this.sql`select id, alias, json, etag from users where alias = ${ref.alias}`;
      return row === undefined ? undefined : userOf(row as never);
    });
  }

  /**
   * Each of `ids` with its move, if it moved, and its user, if it has one
   * (the columns are null otherwise). The ids, integers, go as one array
   * literal cast in the statement, which needs nothing of the driver: an
   * array parameter depends on its table of array types, loaded per pool
   * (a statement of that kind failed now and then right after the pool was
   * replaced). An id may be asked for twice; each gets the row.
   */
  private async readIds(ids: number[]): Promise<IdRow[]> {
    const rows = await this.sql`
      select q.id as wanted, m.current_id, u.id, u.alias, u.json, u.etag
      from unnest(${`{${ids.join(',')}}`}::bigint[]) as q(id)
      left join moves m on m.old_id = q.id
      left join users u on u.id = q.id`;
    const byId = new Map(rows.map((row) => [Number(row.wanted), row as unknown as IdRow]));
    return ids.map((id) => byId.get(id)!);
  }

  /** Asked before every PUT and DELETE by id: gathered with the GETs, whose statement reads the moves too. */
  movedTo(id: number): Promise<number | undefined> {
    return this.reads
      .run(id)
      .then((row) => (row.current_id === null ? undefined : Number(row.current_id)), this.rethrow);
  }

  async listUsers(after: number, limit: number): Promise<UserPage> {
    return this.read(async () => {
      const rows = await this.sql`select id, alias, json from users where id > ${after} order by id limit ${limit + 1}`;
      const page = rows.slice(0, limit);
      return {
        items: page.map((r) => r.json as string),
        aliases: page.filter((r) => r.alias !== null).map((r) => [Number(r.id), r.alias as string] as const),
        next: rows.length > limit ? Number(page.at(-1)!.id) : undefined,
      };
    });
  }

  declaredFields(): readonly FieldDeclaration[] {
    return this.fields.list;
  }

  userSchema(): UserSchema | undefined {
    return this.fields.schema;
  }

  /** Reads the declared fields now (a start; tests after a change of them), as the poll does every half second. */
  async refreshFields(): Promise<void> {
    await this.read(() => this.fields.load());
  }

  /**
   * Evaluated here, on rows read a step at a time: each step is one
   * statement, so the answers are every store's. A read of an index that
   * finds the declarations changed since this instance read them starts
   * the find again on the new ones.
   */
  async findUsers(query: UserQuery): Promise<FoundPage> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.scans.find(query, this.fields.list);
      } catch (error) {
        if (!(error instanceof FieldsChangedError) || attempt >= ATTEMPTS) throw error;
        await this.refreshFields();
      }
    }
  }

  /** The users holding a key of `field` in `range`, with the version of the declarations, in one statement. */
  private async idsInRange(field: FieldDeclaration, range: KeyRange): Promise<number[]> {
    const low = range.lowInclusive ? this.sql`e.key >= ${range.low}` : this.sql`e.key > ${range.low}`;
    const high = range.highInclusive ? this.sql`e.key <= ${range.high}` : this.sql`e.key < ${range.high}`;
    const rows = await this.read(
      () => this.sql`
        select v.version, e.user_id from field_version v left join index_entries e
          on e.path = ${field.path} and e.kind = 'e' and ${low} and ${high}`,
    );
    this.fields.checkVersion(rows[0]!.version);
    return rows.filter((r) => r.user_id !== null).map((r) => Number(r.user_id));
  }

  /** The users holding `key` at `field`, ascending by id: gathered with the other finds' keys, like the GETs. */
  private holdersOfKey(field: FieldDeclaration, key: string): Promise<ScannedUser[]> {
    return this.heldKeys.run({ path: field.path, key }).then(({ version, users }) => {
      this.fields.checkVersion(version);
      return users;
    }, this.rethrow);
  }

  /** The holders of each of `keys`, with the version of the declarations, in one statement. */
  private async holdersOfKeys(keys: HeldKey[]): Promise<HeldUsers[]> {
    // As JSON text, as anyOf's keys; a lone surrogate goes as U+FFFD, as in a text parameter.
    const pairs = JSON.stringify(keys.map((k) => [k.path, k.key.toWellFormed()]));
    const rows = await this.sql`
      select q.i, v.version, u.id, u.alias, u.json from field_version v
        cross join jsonb_array_elements(${pairs}::text::jsonb) with ordinality as q(pair, i)
        left join index_entries e on e.path = q.pair->>0 and e.kind = 'e' and e.key = q.pair->>1
        left join users u on u.id = e.user_id
        order by q.i, u.id`;
    const held = keys.map(() => ({ version: rows[0]!.version, users: [] as ScannedUser[] }));
    for (const r of rows)
      if (r.id !== null)
        held[Number(r.i) - 1]!.users.push({
          id: Number(r.id),
          alias: (r.alias as string | null) ?? undefined,
          json: r.json as string,
        });
    return held;
  }

  /** Sort entries in the order of index-find.ts's IndexSource.sortedAfter: one or two statements. */
  private async sortedAfter(
    field: FieldDeclaration,
    descending: boolean,
    after: IndexEntry | undefined,
    limit: number,
  ): Promise<IndexEntry[]> {
    if (!descending) {
      const place = after ?? { key: '', id: 0 };
      return this.sortEntries(field, this.sql`(e.key, e.user_id) > (${place.key}, ${place.id})`, 'ascending', limit);
    }
    const entries =
      after?.key === LAST_KEY
        ? []
        : await this.sortEntries(
            field,
            after === undefined
              ? this.sql`e.key < ${LAST_KEY}`
              : this
                  .sql`e.key < ${LAST_KEY} and (e.key < ${after.key} or (e.key = ${after.key} and e.user_id > ${after.id}))`,
            'descending',
            limit,
          );
    if (entries.length === limit) return entries;
    const lastAfter = after?.key === LAST_KEY ? after.id : 0;
    const last = await this.sortEntries(
      field,
      this.sql`e.key = ${LAST_KEY} and e.user_id > ${lastAfter}`,
      'ascending',
      limit - entries.length,
    );
    return [...entries, ...last];
  }

  /**
   * Up to `limit` sort entries of `field` where `condition` holds, in
   * `order`, with the version of the declarations (read with them, in one
   * statement, so that entries of a field declared otherwise are refused).
   */
  private async sortEntries(
    field: FieldDeclaration,
    condition: Fragment,
    order: 'ascending' | 'descending',
    limit: number,
  ): Promise<IndexEntry[]> {
    const by = order === 'ascending' ? this.sql`e.key, e.user_id` : this.sql`e.key desc, e.user_id`;
    const rows = await this.read(
      () => this.sql`
        select v.version, e.key, e.user_id from field_version v left join lateral (
          select e.key, e.user_id from index_entries e where e.path = ${field.path} and e.kind = 's' and ${condition} order by ${by} limit ${limit}
        ) e on true order by ${by}`,
    );
    this.fields.checkVersion(rows[0]!.version);
    return rows.filter((r) => r.user_id !== null).map((r) => ({ key: r.key as string, id: Number(r.user_id) }));
  }

  /** The users of `ids` that exist, in that order: one statement. */
  private async usersOf(ids: readonly number[]): Promise<ScannedUser[]> {
    const rows = await this.read(
      () => this.sql`select id, alias, json from users where id = any(${`{${ids.join(',')}}`}::bigint[])`,
    );
    const byId = new Map(rows.map((r) => [Number(r.id), r]));
    return ids.flatMap((id) => {
      const r = byId.get(id);
      return r === undefined ? [] : [{ id, alias: (r.alias as string | null) ?? undefined, json: r.json as string }];
    });
  }

  /** A scan's step: one statement, in id order. */
  private async usersAfter(after: number, limit: number): Promise<ScannedUser[]> {
    return this.read(async () => {
      const rows = await this.sql`select id, alias, json from users where id > ${after} order by id limit ${limit}`;
      return rows.map((r) => ({
        id: Number(r.id),
        alias: (r.alias as string | null) ?? undefined,
        json: r.json as string,
      }));
    });
  }

  private async userCount(): Promise<number> {
    return this.read(async () => {
      const [row] = await this.sql`select count(*)::bigint as users from users`;
      return Number(row!.users);
    });
  }

  async putUser(request: PutRequest): Promise<PutOutcome> {
    return this.announced(await this.put(request));
  }

  private async put(request: PutRequest): Promise<PutOutcome> {
    // A declared field's entries change with the user: the conditional UPDATE writes none.
    // The schema it is checked against is the one of the version the UPDATE requires.
    const { version, schema } = this.fields;
    const direct = this.fields.list.length === 0 ? directReplace(request, schema) : undefined;
    const replaced = direct === undefined ? undefined : await this.replaceDirectly({ ...direct, version });
    return (
      replaced ??
      this.transaction(async (tx, commit) => {
        const { ref } = request;
        const facts = new LoadedFacts();
        // Sent together, run in this order: the key's lock first, then what the decision reads.
        // An alias creates under the next id, a body's id may be a move: both issue ids.
        const [{ fields, schema }] = await Promise.all([
          this.fields.lockIn(tx),
          lockKey(tx, keyOf(ref)),
          loadCounter(tx, facts, ref.kind === 'alias' || request.body.id !== undefined),
          loadTarget(tx, facts, ref),
        ]);
        facts.schema = schema;
        const decision = decidePut(request, facts);
        const taken = await takenByPut(tx, fields, decision);
        if (taken !== undefined) return taken;
        switch (decision.kind) {
          case 'create': {
            const row = userRow(decision.id, decision.alias, decision.json);
            facts.markIssued(decision.id);
            await commit([
              tx`insert into users ${tx(row)}`,
              tx`delete from reservations where id = ${decision.id}`,
              writeIssued(tx, facts),
              ...writeEntries(tx, fields, [row]),
            ]);
            return { kind: 'created', user: userOf({ ...row, id: String(row.id) }) };
          }
          case 'replace': {
            const row = userRow(decision.user.id, decision.user.alias, decision.json);
            await commit([
              tx`update users set json = ${row.json}, etag = ${row.etag} where id = ${row.id}`,
              ...writeEntries(tx, fields, [row]),
            ]);
            return { kind: 'replaced', user: userOf({ ...row, id: String(row.id) }) };
          }
          case 'unchanged':
            return { kind: 'replaced', user: decision.user };
          case 'move':
            return {
              kind: 'moved',
              user: await move(tx, commit, facts, { ...decision, from: decision.user.id, fields }),
            };
          default:
            return decision;
        }
      })
    );
  }

  /**
   * A replace as one conditional write, gathered with the others waiting
   * (`replaceAll`): the user's alias when it was replaced, undefined when no
   * row matched, and then the caller decides the general way.
   */
  private async replaceDirectly(put: VersionedReplace): Promise<PutOutcome | undefined> {
    return this.query(async () => {
      const alias = await this.replaces.run(put);
      return alias === undefined
        ? undefined
        : { kind: 'replaced', user: userOf({ id: String(put.id), alias, json: put.json, etag: put.etag }) };
    });
  }

  /**
   * Replaces by id, at most one per id, as one statement and so one
   * transaction and one commit: each user's row is locked in id order first
   * (two statements locking in different orders could deadlock), then
   * updated where its `etag` is one the replace accepts, evaluated on the
   * newest version once the lock is held; a row that already holds the new
   * representation is left as it is (no write, no change for the feed) and
   * counts as replaced. The result of each: the alias of the replaced user,
   * or undefined when its row did not match.
   */
  private async replaceAll(puts: VersionedReplace[]): Promise<(string | null | undefined)[]> {
    // The input goes as JSON text: a parameter typed jsonb would be encoded again by the driver.
    // `any(array(...))` lets the planner read the users by their key, not scan them.
    return retrying(async () => {
      const input = JSON.stringify(
        puts.map((p) => ({ id: p.id, json: p.json, etag: p.etag, accept: p.ifMatch ?? null, version: p.version })),
      );
      const rows = await this.sql`
        with input as materialized (
          select * from jsonb_to_recordset(${input}::text::jsonb) as x(id bigint, json text, etag text, accept text[], version bigint)
        ), locked as materialized (
          select u.id, u.etag, u.alias, u.json from users u where u.id = any(array(select id from input)) order by u.id for update
        ), matched as materialized (
          select i.id, i.json, i.etag, l.alias, l.json = i.json as unchanged
          from input i join locked l on l.id = i.id
          where (i.accept is null or l.etag = any(i.accept))
            -- Declarations changed since the put was checked: no row matches, and the transaction of a put decides.
            and (select version from field_version) = i.version
        ), updated as (
          update users u set json = m.json, etag = m.etag from matched m where u.id = m.id and not m.unchanged
        )
        select id, alias from matched`;
      const replaced = new Map(rows.map((row) => [Number(row.id), row.alias as string | null]));
      return puts.map((p) => (replaced.has(p.id) ? replaced.get(p.id) : undefined));
    });
  }

  async deleteUser(request: DeleteRequest): Promise<DeleteOutcome> {
    return this.announced(await this.remove(request));
  }

  private async remove(request: DeleteRequest): Promise<DeleteOutcome> {
    return this.transaction(async (tx, commit) => {
      const { ref } = request;
      const facts = new LoadedFacts();
      await Promise.all([lockKey(tx, keyOf(ref)), loadTarget(tx, facts, ref)]);
      const decision = decideDelete(request, facts);
      if (decision.kind !== 'delete') return decision;
      await commit([tx`delete from users where id = ${decision.user.id}`]);
      return { kind: 'deleted', id: decision.user.id, user: decision.user };
    });
  }

  async createUser(request: CreateRequest): Promise<CreateOutcome> {
    return this.announced(await this.create(request));
  }

  private async create(request: CreateRequest): Promise<CreateOutcome> {
    if (request.idempotency === undefined)
      return request.body === undefined ? { kind: 'invalid-body' } : this.creates.run(request.body);
    return this.transaction(async (tx, commit) => {
      const facts = new LoadedFacts();
      // Sent together, run in this order: the key's lock and its record, then the counter's lock.
      const [{ fields, schema }, replay] = await Promise.all([
        this.fields.lockIn(tx),
        this.replay(tx, 'create-user', request.idempotency, request.now),
        loadCounter(tx, facts, true),
      ]);
      facts.schema = schema;
      if (replay !== undefined) return replay;
      if (request.body === undefined) return { kind: 'invalid-body' };
      const taken = await takenIn(tx, fields, JSON.stringify(request.body), 0);
      if (taken !== undefined) return taken;
      const created = createIn(facts, request.body);
      if (created.kind !== 'created') return created;
      await commit([
        tx`insert into users ${tx(created.row)}`,
        writeIssued(tx, facts),
        keep(tx, 'create-user', request.idempotency, created, request.now),
        ...writeEntries(tx, fields, [created.row]),
      ]);
      return created;
    });
  }

  /**
   * Creates without an Idempotency-Key, gathered (`creates`): every create
   * waits on the id counter's lock, held until the commit, so one
   * transaction for all of them locks it once and waits for one commit.
   */
  private createAll(bodies: UserBody[]): Promise<CreateOutcome[]> {
    return this.transaction(async (tx, commit) => {
      const facts = new LoadedFacts();
      const [{ fields, schema }] = await Promise.all([this.fields.lockIn(tx), loadCounter(tx, facts, true)]);
      facts.schema = schema;
      const holders = await holdersOf(
        tx,
        bodies.flatMap((body) => uniqueKeysOf(body, fields)),
      );
      const outcomes = bodies.map((body) => {
        const keys = uniqueKeysOf(body, fields);
        const created = conflictIn(keys, 0, holders) ?? createIn(facts, body);
        // A later create of the batch with the same value finds this one.
        if (created.kind === 'created') hold(holders, keys, created.user.id);
        return created;
      });
      const rows = outcomes.flatMap((o) => (o.kind === 'created' ? [o.row] : []));
      // As JSON text, one parameter however many users: a statement takes at most 65,535 parameters.
      const input = JSON.stringify(rows);
      if (rows.length > 0) {
        await commit([
          tx`insert into users (id, alias, json, etag) select * from jsonb_to_recordset(${input}::text::jsonb) as x(id bigint, alias text, json text, etag text)`,
          writeIssued(tx, facts),
          ...writeEntries(tx, fields, rows),
        ]);
      }
      return outcomes;
    });
  }

  async reserveId(request: ReserveRequest): Promise<ReserveOutcome> {
    if (request.idempotency === undefined) return this.reservations.run(request);
    return this.transaction(async (tx, commit) => {
      const facts = new LoadedFacts();
      // Sent together, run in this order: the key's lock and its record, then the counter's lock,
      // which also serializes the count of live reservations after it.
      const [replay, , live] = await Promise.all([
        this.replay(tx, 'reserve-id', request.idempotency, request.now),
        loadCounter(tx, facts, true),
        liveReservations(tx, request.now),
      ]);
      if (replay !== undefined) return replay;
      const reserved = reserveIn(facts, live, request);
      if (reserved.kind !== 'reserved') return reserved;
      await commit([
        insertReservations(tx, [reserved]),
        writeIssued(tx, facts),
        keep(tx, 'reserve-id', request.idempotency, reserved, request.now),
      ]);
      return reserved;
    });
  }

  /**
   * Reservations without an Idempotency-Key, gathered (`reservations`) as
   * creates are: one lock of the id counter, one count of the live
   * reservations, one `INSERT` and one commit for all of them.
   */
  private reserveAll(requests: ReserveRequest[]): Promise<ReserveOutcome[]> {
    return this.transaction(async (tx, commit) => {
      const facts = new LoadedFacts();
      const earliestNow = requests.reduce((min, r) => Math.min(min, r.now), Infinity);
      const [, live] = await Promise.all([loadCounter(tx, facts, true), liveReservations(tx, earliestNow)]);
      const outcomes = requests.map((r) => reserveIn(facts, live, r));
      const made = outcomes.filter((o): o is Reserved => o.kind === 'reserved');
      if (made.length > 0) await commit([insertReservations(tx, made), writeIssued(tx, facts)]);
      return outcomes;
    });
  }

  async createToken(token: ApiTokenRecord): Promise<'created' | 'name-taken'> {
    const rows = await this.query(
      () => this.sql`insert into api_tokens ${this.sql(tokenRow(token))} on conflict (name) do nothing returning id`,
    );
    return rows.length === 1 ? 'created' : 'name-taken';
  }

  async listTokens(): Promise<readonly ApiTokenRecord[]> {
    return (await this.read(() => this.sql`select * from api_tokens order by seq`)).map(tokenOfRow);
  }

  /** Asked by every request with an API token: gathered. */
  findToken(id: string): Promise<ApiTokenRecord | undefined> {
    return this.tokens.run(id).catch(this.rethrow);
  }

  /** The API token of each of `ids`, if it has one. */
  private async tokensOf(ids: string[]): Promise<(ApiTokenRecord | undefined)[]> {
    const rows = await this.sql`select * from api_tokens where id = any(${anyOf(this.sql, ids)})`;
    const byId = new Map(rows.map((row) => [row.id as string, tokenOfRow(row)]));
    return ids.map((id) => byId.get(id));
  }

  async revokeToken(id: string): Promise<boolean> {
    // The tokens it created go with it, and theirs.
    const rows = await this.query(
      () => this
        .sql`with recursive revoked (id) as (select id from api_tokens where id = ${id} union select t.id from api_tokens t join revoked r on t.parent = r.id)
        delete from api_tokens where id in (select id from revoked) returning id`,
    );
    return rows.some((row) => row.id === id);
  }

  async revokeSessions(revocations: readonly Revocation[]): Promise<void> {
    if (revocations.length === 0) return;
    const rows = revocations.map((r) => ({ session_id: r.sessionId, expires_at: r.expiresAt }));
    await this.query(() => this.sql`insert into revocations ${this.sql(rows)} on conflict (session_id) do nothing`);
  }

  /** Asked by every request with a session: gathered. */
  isRevoked(sessionId: string): Promise<boolean> {
    return this.revocations.run(sessionId).catch(this.rethrow);
  }

  /** Whether each of `sessionIds` is revoked. */
  private async revokedAmong(sessionIds: string[]): Promise<boolean[]> {
    const rows = await this
      .sql`select session_id from revocations where session_id = any(${anyOf(this.sql, sessionIds)})`;
    const revoked = new Set(rows.map((row) => row.session_id as string));
    return sessionIds.map((id) => revoked.has(id));
  }

  /** Drops what has expired; one instance at a time (an advisory lock), the others skip. */
  async sweep(now: number): Promise<void> {
    await this.transaction(async (tx, commit) => {
      const [lock] = await tx`select pg_try_advisory_xact_lock(${SWEEP_LOCK}) as got`;
      if (lock?.got !== true) return;
      await commit([
        tx`delete from reservations where expires_at <= ${now}`,
        tx`delete from idempotency where expires_at <= ${now}`,
        tx`delete from revocations where expires_at <= ${now}`,
        tx`delete from login_attempts where at <= ${now - 3_600_000}`,
        // Changes past the retention: the oldest ones (numbers follow commit times), then the head says where they end.
        tx`with dropped as (delete from changes where seq <= (select max(seq) from changes where at < ${now - this.changesRetentionMs}) returning seq)
           update change_head set trimmed_through = greatest(trimmed_through, (select max(seq) from dropped)) where exists (select 1 from dropped)`,
      ]);
    });
  }

  settled(): undefined {
    return undefined;
  }

  async stats(now: number): Promise<StoreStats> {
    return this.read(async () => {
      const [row] = await this
        .sql`select (select count(*) from users)::bigint as users, (select count(*) from reservations where expires_at > ${now})::bigint as reservations`;
      return {
        users: Number(row!.users),
        reservations: Number(row!.reservations),
        journalBytes: 0,
        fsyncSeconds: this.noSyncs,
      };
    });
  }

  /** Ready when the database answers a statement within the timeout. */
  async readiness(): Promise<Readiness> {
    try {
      await this.again(() => this.sql`select 1`);
      return { ready: true };
    } catch (error) {
      this.outage.failed(error);
      return { ready: false, reason: `the database does not answer (${(error as { code?: string }).code ?? 'error'})` };
    }
  }

  /**
   * Ends the pool. Called once nothing is asked of it any more (the server
   * has drained its requests), so what is left is idle connections, or
   * ones the database ended, whose end the driver waits for in vain: they
   * are cut after CLOSE_SECONDS.
   */
  async close(): Promise<void> {
    clearInterval(this.changePoll);
    this.fields.close();
    this.outage.close();
    await this.sql.end({ timeout: CLOSE_SECONDS });
  }

  /** The kept answer for a key seen before, or undefined; the key is locked until the transaction ends. */
  private async replay(
    tx: Tx,
    operation: IdempotentOperation,
    key: IdempotencyKey | undefined,
    now: number,
  ): Promise<Replay | undefined> {
    if (key === undefined) return undefined;
    const scoped = scopedKey(operation, key.key);
    const [, [row]] = await Promise.all([
      lockKey(tx, `key:${scoped}`),
      tx`select fingerprint, status, body, location, expires_at from idempotency where key = ${scoped} and expires_at > ${now}`,
    ]);
    if (row === undefined) return undefined;
    return replayOf(
      {
        fingerprint: row.fingerprint,
        status: row.status,
        body: row.body,
        location: row.location ?? undefined,
        expiresAt: Number(row.expires_at),
      },
      key.fingerprint,
    );
  }

  /** Reads outside a transaction, tried again on a dropped connection: a read can run twice. */
  private read<T>(run: () => Promise<T>): Promise<T> {
    return this.query(() => this.again(run));
  }

  /**
   * `run` tried again on a dropped connection (`againIfDropped`), within the
   * read deadline: for reads only, which can run twice and which a failure
   * leaves undone.
   */
  private again<T>(run: () => Promise<T>): Promise<T> {
    return withDeadline(againIfDropped(run, this.poolSize, this.timeoutSeconds), this.readDeadline(), () =>
      replacePool(this.sql),
    );
  }

  /**
   * ms a read may take before it fails and the pool is replaced: a second
   * past `--db-timeout`, so that the database's statement timeout and the
   * driver's connect timeout end a read first whenever they can.
   */
  private readDeadline(): number {
    return (this.timeoutSeconds + 1) * 1000;
  }

  /** A statement outside a transaction; a database out of reach is a StoreUnavailableError. */
  private async query<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      return this.rethrow(error);
    }
  }

  /**
   * One transaction (`inTransaction`: `BEGIN` with its first statements,
   * `COMMIT` with its writes), run again when it lost a race; a database
   * out of reach is a StoreUnavailableError.
   */
  private async transaction<T>(run: (tx: Tx, commit: Commit) => Promise<T>): Promise<T> {
    try {
      return await retrying(() => inTransaction(this.sql, this.poolSize, run, this.timeoutSeconds));
    } catch (error) {
      return this.rethrow(error);
    }
  }
}

/** A statement or transaction run again, up to ATTEMPTS times, while it loses a race (a unique key, a deadlock). */
async function retrying<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (attempt >= ATTEMPTS || !isRetryable(error)) throw error;
    }
  }
}

/** A replace tried as one conditional write, with the version of the declarations it was checked against. */
type VersionedReplace = DirectReplace & { readonly version: number };

/** The refusal of a put whose decision writes a value another user holds at a unique field. */
function takenByPut(tx: Tx, fields: readonly FieldDeclaration[], decision: ReturnType<typeof decidePut>) {
  if (decision.kind === 'create') return takenIn(tx, fields, decision.json, decision.id);
  if (decision.kind === 'replace' || decision.kind === 'move')
    return takenIn(tx, fields, decision.json, decision.user.id);
  return undefined;
}

/** The advisory lock's key of a reference. */
function keyOf(ref: UserRef): string {
  return ref.kind === 'alias' ? `alias:${ref.alias}` : `id:${ref.id}`;
}

/**
 * Serializes, across instances, the transactions on one key (an id, an alias, an Idempotency-Key) until this one ends.
 */
async function lockKey(tx: Tx, key: string): Promise<void> {
  await tx`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`;
}

/**
 * The id-change variant: the user at `from` moves to `to`; every old id of it now points at `to`. The writes go
 * together.
 */
async function move(
  tx: Tx,
  commit: Commit,
  facts: LoadedFacts,
  moving: {
    from: number;
    to: number;
    user: { alias: string | undefined };
    json: string;
    fields: readonly FieldDeclaration[];
  },
) {
  const { from, to, json, fields } = moving;
  const row = userRow(to, moving.user.alias, json);
  facts.markIssued(to);
  await commit([
    // The delete and the insert are one change of the feed: a move (schema.ts, users_change).
    tx`select set_config('users_server.moving', ${String(from)}, true)`,
    tx`delete from users where id = ${from}`,
    tx`insert into users ${tx(row)}`,
    tx`update moves set current_id = ${to} where current_id = ${from}`,
    tx`insert into moves (old_id, current_id) values (${from}, ${to})`,
    writeIssued(tx, facts),
    // The old id's entries went with its row (on delete cascade).
    ...writeEntries(tx, fields, [row]),
  ]);
  return userOf({ ...row, id: String(row.id) });
}

/** The reservations live at `now`, and the earliest of their expiries; counted under the id counter's lock. */
interface LiveReservations {
  count: number;
  earliest: number | undefined;
}

async function liveReservations(tx: Tx, now: number): Promise<LiveReservations> {
  const [row] =
    await tx`select count(*)::int as count, min(expires_at) as earliest from reservations where expires_at > ${now}`;
  return { count: row!.count as number, earliest: row!.earliest === null ? undefined : Number(row!.earliest) };
}

/** A reservation decided against the `live` ones (and counted in them) with its id issued in `facts`. */
function reserveIn(facts: LoadedFacts, live: LiveReservations, request: ReserveRequest): ReserveOutcome {
  if (live.count >= request.max) return tooManyReservations(request.max, live.earliest ?? request.now, request.now);
  const id = facts.nextId();
  if (id === undefined) return { kind: 'ids-exhausted', detail: 'Every safe integer id has been issued.' };
  const expiresAt = request.now + request.ttlMs;
  facts.markIssued(id);
  live.count++;
  live.earliest = Math.min(live.earliest ?? expiresAt, expiresAt);
  return { kind: 'reserved', id, expiresAt };
}

/** The reservations made, as JSON text: one parameter however many. */
function insertReservations(tx: Tx, made: readonly Reserved[]) {
  const input = JSON.stringify(made.map((r) => ({ id: r.id, expires_at: r.expiresAt })));
  return tx`insert into reservations (id, expires_at) select * from jsonb_to_recordset(${input}::text::jsonb) as x(id bigint, expires_at bigint)
    on conflict (id) do update set expires_at = excluded.expires_at`;
}

/** A create decided in `facts` (its id issued there), with the row to insert. */
function createIn(
  facts: LoadedFacts,
  body: UserBody,
): CreatedRow | Exclude<ReturnType<typeof decideCreate>, { kind: 'create' }> {
  const decision = decideCreate(body, facts);
  if (decision.kind !== 'create') return decision;
  facts.markIssued(decision.id);
  const row = userRow(decision.id, undefined, decision.json);
  return {
    kind: 'created',
    user: userOf({ ...row, id: String(row.id) }),
    row,
  };
}

type CreatedRow = Created & { row: ReturnType<typeof userRow> };

/** Adds the record that keeps the answer to `outcome` under its key to the transaction. */
async function keep<Outcome>(
  tx: Tx,
  operation: IdempotentOperation,
  key: KeyedRequest<Outcome> | undefined,
  outcome: Outcome,
  now: number,
): Promise<void> {
  if (key === undefined) return;
  const record = keptRecord(key, outcome, now);
  const row = {
    key: scopedKey(operation, key.key),
    fingerprint: record.fingerprint,
    status: record.status,
    body: record.body,
    location: record.location ?? null,
    expires_at: record.expiresAt,
  };
  await tx`insert into idempotency ${tx(row)} on conflict (key) do update set fingerprint = excluded.fingerprint, status = excluded.status, body = excluded.body, location = excluded.location, expires_at = excluded.expires_at`;
}
