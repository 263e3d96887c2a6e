/**
 * A change of what every write of a user reads in its transaction on
 * PostgreSQL: the declared fields (declared-fields.ts) and the schema of
 * the users' fields (user-schema.ts), whose changes `field_version` counts.
 */
import type { KeptChange } from '../proposed-file.js';
import type { Sql } from './driver.js';
import { inTransaction, type Tx } from './transaction.js';

/**
 * A change of what every write reads (the declared fields, the schema) in
 * one transaction that holds writes of users off: `read` gives the current
 * value, `edit` the next one (undefined: no change), `apply` checks it
 * against every user and writes it (a refusal is its sentence, and it
 * writes nothing), and the version is raised, so every instance reads it.
 */
export async function changeWritesRead<T>(
  sql: Sql,
  read: (tx: Tx) => Promise<T>,
  edit: (current: T) => T | undefined,
  apply: (
    tx: Tx,
    current: T,
    next: T,
    users: readonly { readonly id: number; readonly json: string }[],
  ) => Promise<string | undefined>,
): Promise<KeptChange> {
  return inTransaction(sql, 1, async (tx): Promise<KeptChange> => {
    await tx`lock table users in share row exclusive mode`;
    const current = await read(tx);
    const next = edit(current);
    if (next === undefined) return { changed: false };
    const users = (await tx`select id, json from users order by id`).map((r) => ({
      id: Number(r.id),
      json: r.json as string,
    }));
    const refused = await apply(tx, current, next, users);
    if (refused !== undefined) return { changed: false, refused };
    await tx`update field_version set version = version + 1`;
    return { changed: true };
  });
}
