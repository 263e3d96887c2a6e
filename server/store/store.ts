/**
 * The storage interface. A store keeps the whole live state in memory
 * (`StoreState`), so reads are synchronous map lookups on the hot path, and
 * writes go through `commit`: the mutations are applied to the state at once,
 * in order, and the promise resolves when they are durable. Because handlers
 * decide and commit in one synchronous step, two requests never interleave
 * between a check and its write.
 *
 * The memory store resolves at once; the journal store resolves after its
 * record is written and fdatasynced. The HTTP layer cannot tell them apart.
 */
import type { Histogram } from '../ops/histogram.js';
import type { StoreState } from './memory/state.js';

/** One change to the state; the unit a journal writes. */
export type Mutation =
  /** Create or replace a user; creating under a reserved id uses the reservation up. */
  | { op: 'put'; id: number; alias?: string | undefined; json: string }
  /** Delete a user: its id is retired, its alias released. */
  | { op: 'delete'; id: number }
  /** The id-change variant: the user at `from` moves to `to` with a new representation. */
  | { op: 'move'; from: number; to: number; json: string }
  | { op: 'reserve'; id: number; expiresAt: number }
  | { op: 'idempotency'; key: string; record: IdempotencyRecord }
  | { op: 'revoke'; sessionId: string; expiresAt: number };

export interface UserRecord {
  readonly id: number;
  /** The alias the user was created through, if any. */
  readonly alias: string | undefined;
  /** The representation, serialized once per stored version. */
  readonly json: string;
  /** Strong entity tag of `json`, computed on first use. */
  etag: string | undefined;
}

export interface IdempotencyRecord {
  /** SHA-256 of the request body, to tell a replay from a reuse. */
  fingerprint: string;
  status: number;
  body: string;
  location: string | undefined;
  expiresAt: number;
}

export interface Store {
  readonly state: StoreState;
  /** Applies the mutations now; resolves once they are durable. */
  commit(mutations: readonly Mutation[]): Promise<void>;
  /**
   * Resolves when every mutation applied so far is durable; undefined when
   * that is already so. A read answers only after it, so no client is shown
   * a write that a crash could still take back.
   */
  durable(): Promise<void> | undefined;
  /** Flushes and releases the store. */
  close(): Promise<void>;
  /** Figures for GET /metrics. */
  stats(): StoreStats;
}

export interface StoreStats {
  /** Bytes in the journals that no snapshot covers yet; 0 for the memory store. */
  readonly journalBytes: number;
  /** How long each batch's fdatasync took; never observed by the memory store. */
  readonly fsyncSeconds: Histogram;
}

/** A store that can no longer make writes durable: the request fails with 500 and the server stops. */
export class StoreFailedError extends Error {
  override readonly name: string = 'StoreFailedError';
}
