import { randomUUID } from 'node:crypto';
import {
  INSTANCE_BEAT_MS,
  INSTANCE_GONE_MS,
  type InstanceInfo,
  type LiveInstance,
  type LoginTryCounts,
  type SharedSettings,
  type TryCount,
} from '../store.js';
import { DEFAULT_DB_TIMEOUT_SECONDS, replacePool, unavailable, withDeadline, type Sql } from './driver.js';

/** The built-in account's name (security/accounts-file.ts's BUILT_IN_ACCOUNT). */
const ADMIN_ACCOUNT = 'admin';

/**
 * What every instance of a deployment shares besides the users, in the
 * database: the signing secrets, the generated admin password, the
 * accounts, and the failed-login limit. A value made on first use (a
 * secret, the admin password) is inserted only if none is there yet, and
 * read back, so instances starting together agree on one.
 */
export class PostgresSettings implements SharedSettings {
  constructor(
    private readonly sql: Sql,
    /**
     * Rethrows a statement's failure as a request's: a database out of reach is a StoreUnavailableError
     * (PostgresStore's also logs the outage).
     */
    private readonly rethrow: (error: unknown) => never = (error) => {
      throw unavailable(error);
    },
    /** ms a read may take before it fails and the pool is replaced (PostgresStore's read deadline). */
    private readonly readMs = (DEFAULT_DB_TIMEOUT_SECONDS + 1) * 1000,
  ) {}

  async secrets(make: () => string): Promise<string[]> {
    return this.read(async () => {
      await this.sql`insert into secrets (position, secret) values (0, ${make()}) on conflict (position) do nothing`;
      const rows = await this.sql`select secret from secrets order by position`;
      return rows.map((r) => r.secret as string);
    });
  }

  async replaceSecrets(secrets: readonly string[]): Promise<void> {
    await this.guard(() =>
      this.sql.begin(async (tx) => {
        await tx`delete from secrets`;
        for (const [position, secret] of secrets.entries())
          await tx`insert into secrets (position, secret) values (${position}, ${secret})`;
      }),
    );
  }

  async generatedAdminPassword(make: () => string): Promise<{ password: string; created: boolean }> {
    return this.read(async () => {
      const made = make();
      const inserted = await this
        .sql`insert into settings (name, value) values ('admin-password', ${made}) on conflict (name) do nothing returning value`;
      if (inserted.length > 0) return { password: made, created: true };
      const [row] = await this.sql`select value from settings where name = 'admin-password'`;
      return { password: row!.value as string, created: false };
    });
  }

  async updateAdminIdentity(update: (kept: string | undefined) => string): Promise<string> {
    return this.guard(() =>
      this.sql.begin(async (tx) => {
        // The row is there ('' for none) and locked, so that instances starting together with one password agree on one
        // identity.
        await tx`insert into settings (name, value) values ('admin-identity', '') on conflict (name) do nothing`;
        const [row] = await tx`select value from settings where name = 'admin-identity' for update`;
        const kept = (row!.value as string) || undefined;
        const next = update(kept);
        if (next !== kept) await tx`update settings set value = ${next} where name = 'admin-identity'`;
        return next;
      }),
    );
  }

  async accountRecords(): Promise<string[]> {
    return this.read(async () =>
      (await this.sql`select record from accounts order by name`).map((r) => r.record as string),
    );
  }

  async updateAccountRecords(update: (records: Map<string, string>) => void): Promise<void> {
    await this.guard(() =>
      this.sql.begin(async (tx) => {
        // One change at a time, whichever instance or command makes it.
        await tx`lock table accounts in exclusive mode`;
        const records = new Map<string, string>();
        for (const row of await tx`select name, record from accounts`)
          records.set(row.name as string, row.record as string);
        const before = new Map(records);
        update(records);
        for (const name of before.keys()) if (!records.has(name)) await tx`delete from accounts where name = ${name}`;
        for (const [name, record] of records) {
          if (before.get(name) !== record)
            await tx`insert into accounts (name, record) values (${name}, ${record}) on conflict (name) do update set record = excluded.record`;
        }
        // Once the admin has a record, its generated password is gone: it no longer logs in.
        if (records.has(ADMIN_ACCOUNT)) await tx`delete from settings where name = 'admin-password'`;
      }),
    );
  }

  async takeLoginSlot<R>(
    address: string,
    key: string,
    since: number,
    now: number,
    refuse: (counts: LoginTryCounts) => R | undefined,
  ): Promise<{ refused: R } | { slot: string }> {
    return this.guard(() =>
      this.sql.begin(async (tx) => {
        // Tries of one address, from any instance, are counted one at a time.
        await tx`select pg_advisory_xact_lock(hashtextextended(${'login:' + address}, 0))`;
        const [row] = await tx`
          select count(*) filter (where key = ${key} and not pending)::int as account_failures,
                 min(at) filter (where key = ${key} and not pending) as account_oldest,
                 count(*) filter (where key = ${key} and pending)::int as account_pending,
                 count(*) filter (where not pending)::int as address_failures,
                 min(at) filter (where not pending) as address_oldest,
                 count(*) filter (where pending)::int as address_pending
          from login_attempts where address = ${address} and at > ${since}`;
        const refused = refuse({ account: tryCount(row!, 'account'), address: tryCount(row!, 'address') });
        if (refused !== undefined) return { refused };
        const [taken] =
          await tx`insert into login_attempts (address, key, at, pending) values (${address}, ${key}, ${now}, true) returning id`;
        return { slot: String(taken!.id) };
      }),
    );
  }

  async settleLoginSlot(slot: string, key: string, outcome: 'failed' | 'succeeded' | 'released'): Promise<void> {
    await this.guard(() => {
      if (outcome === 'failed') return this.sql`update login_attempts set pending = false where id = ${slot}`;
      if (outcome === 'released') return this.sql`delete from login_attempts where id = ${slot}`;
      // Other tries of the key still being checked keep their rows: a wrong one among them still counts.
      return this.sql`delete from login_attempts where id = ${slot} or (key = ${key} and not pending)`;
    });
  }

  // Times of instances are the database's clock (ms), so that instances on several hosts agree on who is silent.
  async announce(instance: InstanceInfo): Promise<{ close(): Promise<void> }> {
    const id = randomUUID();
    // Bounded like a read: a row that lands after its start gave up is an instance the others see go silent.
    await this.read(
      () =>
        this
          .sql`insert into instances (id, host, pid, url, started_at, seen_at) values (${id}, ${instance.host}, ${instance.pid}, ${instance.url}, (extract(epoch from clock_timestamp()) * 1000)::bigint, (extract(epoch from clock_timestamp()) * 1000)::bigint)`,
    );
    // A beat that fails (the database away) is simply missed: the next one catches up.
    const timer = setInterval(
      () =>
        void this
          .sql`update instances set seen_at = (extract(epoch from clock_timestamp()) * 1000)::bigint where id = ${id}`.catch(
          () => {},
        ),
      INSTANCE_BEAT_MS,
    );
    timer.unref();
    return {
      close: async () => {
        clearInterval(timer);
        await this.sql`delete from instances where id = ${id}`.catch(() => {});
      },
    };
  }

  async liveInstances(): Promise<LiveInstance[]> {
    return this.read(async () => {
      const rows = await this
        .sql`select host, pid, url, (extract(epoch from clock_timestamp()) * 1000)::bigint - seen_at as silent from instances where seen_at > (extract(epoch from clock_timestamp()) * 1000)::bigint - ${INSTANCE_GONE_MS} order by started_at`;
      return rows.map((r) => ({
        host: r.host as string,
        pid: r.pid as number,
        url: r.url as string,
        silentMs: Number(r.silent),
      }));
    });
  }

  /**
   * A read, or an insert of a value made on first use (which may land
   * late: it is read back, whoever made it), bounded like the store's
   * reads: a connection gone silent (no answer, no close) fails it after
   * `readMs` instead of holding a start or a reload for ever.
   */
  private read<T>(run: () => Promise<T>): Promise<T> {
    return this.guard(() => withDeadline(run(), this.readMs, () => replacePool(this.sql)));
  }

  private async guard<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      return this.rethrow(error);
    }
  }
}

/** One side of the counts of takeLoginSlot's row. */
function tryCount(row: Record<string, unknown>, side: 'account' | 'address'): TryCount {
  const oldest = row[`${side}_oldest`];
  return {
    failures: Number(row[`${side}_failures`]),
    oldest: oldest === null || oldest === undefined ? Infinity : Number(oldest),
    pending: Number(row[`${side}_pending`]),
  };
}
