/**
 * The database schema as versioned migrations. A migration runs once, in
 * order, in a transaction, under a transaction-wide advisory lock, so that
 * several instances starting together on an empty database do not race:
 * the first creates the schema, the others wait and find it done.
 * `schema_migrations` records what was applied. An instance refuses a
 * schema newer than it knows.
 */
import { ServerCommandError } from '../../errors.js';
import type { Sql } from './driver.js';

/** The advisory lock key of migrations: "users-server schema" in a bigint. */
const MIGRATION_LOCK = 7_557_300_001;

/** Each entry is one version: its statements, applied together. */
const MIGRATIONS: readonly (readonly string[])[] = [
  [
    `create table users (id bigint primary key, alias text unique, json text not null, etag text not null)`,
    // The id-change variant: every old id points straight at the user's current id.
    `create table moves (old_id bigint primary key, current_id bigint not null)`,
    `create index moves_current_id on moves (current_id)`,
    // The id high-water mark: every id from 1 to last_id has been issued.
    `create table id_counter (singleton boolean primary key default true check (singleton), last_id bigint not null)`,
    `insert into id_counter (singleton, last_id) values (true, 0)`,
    // Ids above last_id issued out of turn, as targets of a move.
    `create table claimed_ids (id bigint primary key)`,
    `create table reservations (id bigint primary key, expires_at bigint not null)`,
    `create table idempotency (key text primary key, fingerprint text not null, status integer not null, body text not null, location text, expires_at bigint not null)`,
    `create table revocations (session_id text primary key, expires_at bigint not null)`,
    // Shared by every instance: signing secrets (position 0 signs), the generated admin password, accounts.
    `create table secrets (position integer primary key, secret text not null)`,
    `create table settings (name text primary key, value text not null)`,
    `create table accounts (name text primary key, record text not null)`,
    // The failed-login limit, held across instances.
    `create table login_attempts (key text not null, at bigint not null)`,
    `create index login_attempts_key_at on login_attempts (key, at)`,
  ],
  [
    // API tokens: their SHA-256 only, never the token.
    // seq keeps the order of creation (listings are oldest first) when two share a millisecond.
    `create table api_tokens (id text primary key, seq bigint generated always as identity, name text not null unique, role text not null, hash text not null, created_by text not null, created_at bigint not null, expires_at bigint)`,
  ],
  [
    // Running instances, each a row it refreshes while it serves (seen_at, the database's clock in ms), so that `copy`
    // can refuse a database in use.
    `create table instances (id text primary key, host text not null, pid integer not null, url text not null, started_at bigint not null, seen_at bigint not null)`,
  ],
  [
    // The feed of changes: every write of a user row, numbered in commit order. The head's row is
    // locked by each writing transaction from its first change to its commit, so numbers are
    // taken in commit order and a reader never sees a number before a smaller one.
    `create table change_head (singleton boolean primary key default true check (singleton), last_seq bigint not null, trimmed_through bigint not null)`,
    `insert into change_head (singleton, last_seq, trimmed_through) values (true, 0, 0)`,
    `create table changes (seq bigint primary key, at bigint not null, op text not null, id bigint not null, from_id bigint, json text)`,
    `create index changes_at on changes (at)`,
    // Per statement, so that a gathered write of many users takes the head once. users_server.moving
    // (set for one transaction by a move) makes its delete and insert one change; users_server.no_changes
    // = on (copy) writes users without changes. A statement's rows are numbered in id order.
    `create function users_changes_record() returns trigger language plpgsql as $$
     declare
       moving text := coalesce(current_setting('users_server.moving', true), '');
       at bigint := (extract(epoch from clock_timestamp()) * 1000)::bigint;
       first bigint;
       n bigint;
     begin
       if current_setting('users_server.no_changes', true) = 'on' then return null; end if;
       if tg_op = 'DELETE' then
         select count(*) into n from old_rows where id::text <> moving;
       else
         select count(*) into n from new_rows;
       end if;
       if n = 0 then return null; end if;
       update change_head set last_seq = last_seq + n returning last_seq - n into first;
       if tg_op = 'DELETE' then
         insert into changes (seq, at, op, id)
           select first + row_number() over (order by id), at, 'delete', id from old_rows where id::text <> moving;
       elsif tg_op = 'INSERT' and moving <> '' then
         insert into changes (seq, at, op, id, from_id, json)
           select first + row_number() over (order by id), at, 'move', id, moving::bigint, json from new_rows;
       else
         insert into changes (seq, at, op, id, json)
           select first + row_number() over (order by id), at, 'put', id, json from new_rows;
       end if;
       return null;
     end $$`,
    `create trigger users_inserted after insert on users referencing new table as new_rows for each statement execute function users_changes_record()`,
    `create trigger users_updated after update on users referencing new table as new_rows for each statement execute function users_changes_record()`,
    `create trigger users_deleted after delete on users referencing old table as old_rows for each statement execute function users_changes_record()`,
  ],
  [
    // A token belongs to an account (created_by, added at owner_since), and to the token that created it, if one did
    // (parent).
    `alter table api_tokens add column owner_since text, add column parent text`,
    `create index api_tokens_parent on api_tokens (parent)`,
  ],
  [
    // The failed-login limit per address over all names, and tries still being checked (pending)
    // told from failures; id names one try, so that its outcome settles that row alone.
    `alter table login_attempts add column address text not null default ''`,
    `alter table login_attempts add column pending boolean not null default false`,
    `alter table login_attempts add column id bigint generated always as identity`,
    `create index login_attempts_address_at on login_attempts (address, at)`,
  ],
  [
    // Declared fields (API.md "Declared fields"). field_version counts their changes: a write
    // locks users (row exclusive) and reads it, an index add or remove locks users against
    // writes (share row exclusive) and raises it, so no write misses a change of declarations.
    `create table field_declarations (path text primary key, is_unique boolean not null, case_insensitive boolean not null)`,
    `create table field_version (singleton boolean primary key default true check (singleton), version bigint not null)`,
    `insert into field_version (singleton, version) values (true, 0)`,
    // Their indexes: keys computed by users/index-key.ts, compared as bytes (collate "C"),
    // kind 'e' for a key a user holds, 's' for its sort key; a unique field's keys once more,
    // keyed by path and key alone, so that of two writes of one value, one fails.
    `create table index_entries (path text not null, kind text not null, key text collate "C" not null, user_id bigint not null references users (id) on delete cascade, primary key (path, kind, key, user_id))`,
    `create index index_entries_user_id on index_entries (user_id)`,
    `create table unique_values (path text not null, key text collate "C" not null, user_id bigint not null references users (id) on delete cascade, primary key (path, key))`,
    `create index unique_values_user_id on unique_values (user_id)`,
  ],
  [
    // The schema of the users' fields (users/user-schema.ts), at most one. A change of it raises
    // field_version as a change of declarations does, so a write checks the schema that holds at its commit.
    `create table user_schema (singleton boolean primary key default true check (singleton), document text not null, checked_existing boolean not null)`,
  ],
];

/** The newest schema version this users-server knows. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/** The database's schema version: 0 for an empty database. */
export async function schemaVersion(sql: Sql): Promise<number> {
  const [table] = await sql`select to_regclass('schema_migrations') as name`;
  if (table?.name === null || table?.name === undefined) return 0;
  const [row] = await sql`select coalesce(max(version), 0) as version from schema_migrations`;
  return Number(row!.version);
}

/** Refuses a schema newer than this users-server knows. */
export function checkNotNewer(version: number): void {
  if (version > SCHEMA_VERSION) {
    throw new ServerCommandError(
      `the database's schema is version ${version}; this users-server knows versions up to ${SCHEMA_VERSION}: upgrade users-server`,
    );
  }
}

/**
 * Applies every migration the database lacks; returns the versions applied.
 * Needs the right to change the schema; an operator who does not give the
 * service that right runs `users-server migrate` instead.
 */
export async function migrate(sql: Sql, log: (message: string) => void): Promise<number[]> {
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${MIGRATION_LOCK})`;
    await tx`create table if not exists schema_migrations (version integer primary key, applied_at timestamptz not null default now())`;
    const [row] = await tx`select coalesce(max(version), 0) as version from schema_migrations`;
    const current = Number(row!.version);
    checkNotNewer(current);
    const applied: number[] = [];
    for (let version = current + 1; version <= SCHEMA_VERSION; version++) {
      for (const statement of MIGRATIONS[version - 1]!) await tx.unsafe(statement);
      await tx`insert into schema_migrations (version) values (${version})`;
      applied.push(version);
      log(`users-server: applied schema version ${version} of ${SCHEMA_VERSION}`);
    }
    return applied;
  });
}
