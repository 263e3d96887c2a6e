import type { StoreDump } from '../dump.js';
import type { Sql, TransactionSql } from './driver.js';
import { buildEntries, readDeclarations } from './declared-fields.js';
import { tokenOfRow, tokenRow, userRow } from './facts.js';
import { readSchemaSetting, writeSchema } from './user-schema.js';

/** Everything the database holds, read in one transaction (a consistent view). */
export async function readPostgresDump(sql: Sql, now: number): Promise<StoreDump> {
  return (await sql.begin('isolation level repeatable read', async (tx) => {
    const [counter] = await tx`select last_id from id_counter`;
    const admin = await tx`select value from settings where name = 'admin-password'`;
    const identity = await tx`select value from settings where name = 'admin-identity'`;
    return {
      lastId: Number(counter!.last_id),
      claimed: (await tx`select id from claimed_ids order by id`).map((r) => Number(r.id)),
      users: (await tx`select id, alias, json from users order by id`).map((r) => ({
        id: Number(r.id),
        alias: (r.alias as string | null) ?? undefined,
        json: r.json as string,
      })),
      redirects: (await tx`select old_id, current_id from moves order by old_id`).map(
        (r) => [Number(r.old_id), Number(r.current_id)] as [number, number],
      ),
      reservations: (await tx`select id, expires_at from reservations where expires_at > ${now} order by id`).map(
        (r) => [Number(r.id), Number(r.expires_at)] as [number, number],
      ),
      idempotency: (await tx`select * from idempotency where expires_at > ${now} order by key`).map(
        (r) =>
          [
            r.key as string,
            {
              fingerprint: r.fingerprint as string,
              status: r.status as number,
              body: r.body as string,
              location: (r.location as string | null) ?? undefined,
              expiresAt: Number(r.expires_at),
            },
          ] as StoreDump['idempotency'][number],
      ),
      revoked: (
        await tx`select session_id, expires_at from revocations where expires_at > ${now} order by session_id`
      ).map((r) => [r.session_id as string, Number(r.expires_at)] as [string, number]),
      secrets: (await tx`select secret from secrets order by position`).map((r) => r.secret as string),
      adminPassword: (admin[0]?.value as string | undefined) ?? undefined,
      adminIdentity: (identity[0]?.value as string | undefined) || undefined,
      accounts: (await tx`select record from accounts order by name`).map((r) => r.record as string),
      tokens: (await tx`select * from api_tokens order by seq`).map(tokenOfRow),
      lastChange: Number((await tx`select last_seq from change_head`)[0]!.last_seq),
      declarations: await readDeclarations(tx),
      schema: await readSchemaSetting(tx),
    };
  })) as StoreDump;
}

const BATCH = 1000;

/** Replaces everything the database holds with `dump`, in one transaction. */
export async function writePostgresDump(sql: Sql, dump: StoreDump): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`truncate users, moves, claimed_ids, reservations, idempotency, revocations, secrets, settings, accounts, login_attempts, api_tokens, changes, index_entries, unique_values, field_declarations`;
    await tx`update id_counter set last_id = ${dump.lastId}`;
    // The copy's users are its state, not changes: its feed starts after the source's last change.
    await tx`select set_config('users_server.no_changes', 'on', true)`;
    await tx`update change_head set last_seq = ${dump.lastChange}, trimmed_through = ${dump.lastChange}`;
    for (let i = 0; i < dump.users.length; i += BATCH) {
      const rows = dump.users.slice(i, i + BATCH).map((u) => userRow(u.id, u.alias, u.json));
      await tx`insert into users ${tx(rows)}`;
    }
    await insertAll(
      tx,
      'claimed_ids',
      dump.claimed.map((id) => ({ id })),
    );
    await insertAll(
      tx,
      'moves',
      dump.redirects.map(([old_id, current_id]) => ({ old_id, current_id })),
    );
    await insertAll(
      tx,
      'reservations',
      dump.reservations.map(([id, expires_at]) => ({ id, expires_at })),
    );
    await insertAll(
      tx,
      'idempotency',
      dump.idempotency.map(([key, r]) => ({
        key,
        fingerprint: r.fingerprint,
        status: r.status,
        body: r.body,
        location: r.location ?? null,
        expires_at: r.expiresAt,
      })),
    );
    await insertAll(
      tx,
      'revocations',
      dump.revoked.map(([session_id, expires_at]) => ({ session_id, expires_at })),
    );
    await insertAll(
      tx,
      'secrets',
      dump.secrets.map((secret, position) => ({ position, secret })),
    );
    await insertAll(
      tx,
      'accounts',
      dump.accounts.map((record) => ({ name: (JSON.parse(record) as { name: string }).name, record })),
    );
    await insertAll(tx, 'api_tokens', dump.tokens.map(tokenRow));
    if (dump.adminPassword !== undefined)
      await tx`insert into settings (name, value) values ('admin-password', ${dump.adminPassword})`;
    if (dump.adminIdentity !== undefined)
      await tx`insert into settings (name, value) values ('admin-identity', ${dump.adminIdentity})`;
    await writeDeclarations(tx, dump);
  });
}

/**
 * The dump's declared fields and the entries of their indexes, and its schema; the version raised, so running instances
 * read them.
 */
async function writeDeclarations(tx: TransactionSql, dump: StoreDump): Promise<void> {
  await insertAll(
    tx,
    'field_declarations',
    dump.declarations.map((f) => ({ path: f.path, is_unique: f.unique, case_insensitive: f.caseInsensitive })),
  );
  await buildEntries(tx, dump.declarations, dump.users);
  await writeSchema(tx, dump.schema);
  await tx`update field_version set version = version + 1`;
}

async function insertAll(
  tx: TransactionSql,
  table: string,
  rows: Record<string, string | number | boolean | null>[],
): Promise<void> {
  for (let i = 0; i < rows.length; i += BATCH) await tx`insert into ${tx(table)} ${tx(rows.slice(i, i + BATCH))}`;
}
