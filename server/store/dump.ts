import type { FieldDeclaration } from '../users/declared-fields.js';
import type { StoredUser } from '../users/rules.js';
import type { SchemaSetting } from '../users/user-schema.js';
import type { IdempotencyRecord } from './kept-answer.js';
import type { ApiTokenRecord } from './store.js';

/**
 * Everything a deployment holds, in a form both kinds of durable store
 * read and write: what `users-server copy` carries from a data directory
 * to a PostgreSQL database and back. Expired entries are left out.
 */
export interface StoreDump {
  /** Every id from 1 to lastId has been issued. */
  lastId: number;
  /** Ids above lastId issued out of turn (targets of a move). */
  claimed: number[];
  /** In ascending id order. */
  users: Pick<StoredUser, 'id' | 'alias' | 'json'>[];
  /** Old id -> current id. */
  redirects: [number, number][];
  /** Id -> expiry (ms). */
  reservations: [number, number][];
  /** Scoped key -> record. */
  idempotency: [string, IdempotencyRecord][];
  /** Session id -> expiry (ms). */
  revoked: [string, number][];
  /** API tokens, oldest first (their hashes only). */
  tokens: ApiTokenRecord[];
  /**
   * The number of the last change of the feed of changes. The changes
   * themselves are not copied: the copy's feed starts after this number, so
   * a reader that had seen every change resumes there, and one that had not
   * is told it missed some (410).
   */
  lastChange: number;
  /** Signing secrets, the first signs; empty when none was made yet. */
  secrets: string[];
  /** The generated admin password, when there is one. */
  adminPassword: string | undefined;
  /** The built-in admin's identity (security/admin-identity.ts), so that its sessions stay valid on the copy. */
  adminIdentity: string | undefined;
  /**
   * The accounts (the admin among them once its password was changed), serialized (security/accounts-file.ts's line
   * format).
   */
  accounts: string[];
  /** The declared fields (API.md "Declared fields"). */
  declarations: FieldDeclaration[];
  /** The schema of the users' fields (users/user-schema.ts); null: none. */
  schema: SchemaSetting | null;
}

/** One line saying what a dump holds. */
export function describeDump(dump: StoreDump): string {
  const aliases = dump.users.filter((u) => u.alias !== undefined).length;
  return (
    `${dump.users.length} users (${aliases} with an alias), ids issued up to ${Math.max(dump.lastId, ...dump.claimed)}, ${dump.redirects.length} moved ids, ` +
    `${dump.reservations.length} live reservations, ${dump.idempotency.length} Idempotency-Key records, ${dump.revoked.length} revoked sessions, ${dump.tokens.length} API tokens, ` +
    `${dump.accounts.length} accounts, ${dump.declarations.length} declared fields, ${dump.schema === null ? 'no' : 'the'} schema of the users' fields, ${dump.secrets.length} signing secrets, ${dump.adminPassword === undefined ? 'no' : 'the'} generated admin password`
  );
}

/** True when the dump holds nothing a copy could overwrite. */
export function isEmptyDump(dump: StoreDump): boolean {
  return (
    dump.users.length === 0 &&
    dump.lastId === 0 &&
    dump.claimed.length === 0 &&
    dump.reservations.length === 0 &&
    dump.accounts.length === 0 &&
    dump.tokens.length === 0
  );
}
