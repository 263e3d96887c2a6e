/**
 * The answers a store keeps under an Idempotency-Key (API.md "Reservations
 * and Idempotency-Key"). A replay answers as the first request did, so the
 * journal and the database keep the answer serialized (status, body,
 * Location), written in the same atomic step as the create. The HTTP layer
 * builds the answer (`KeyedRequest.answerOf`); a store keeps it as given.
 */
import { IDEMPOTENCY_TTL_MS, keyReused, type IdempotencyKey, type Refusal } from '../users/rules.js';

/** A first response kept for its Idempotency-Key, replayed as it was. */
export interface KeptAnswer {
  readonly status: number;
  readonly body: string;
  readonly location: string | undefined;
}

/**
 * An Idempotency-Key with the answer its first request gets: built by the
 * HTTP layer from the operation's outcome, kept by the store beside it.
 */
export interface KeyedRequest<Outcome> extends IdempotencyKey {
  readonly answerOf: (outcome: Outcome) => KeptAnswer;
}

/** What a store keeps per key: the answer, the request body's fingerprint, the expiry. */
export interface IdempotencyRecord extends KeptAnswer {
  /** SHA-256 of the request body, to tell a replay from a reuse. */
  readonly fingerprint: string;
  readonly expiresAt: number;
}

export type Replay = { readonly kind: 'replayed'; readonly answer: KeptAnswer } | Refusal;

/** A key seen before: the same body replays the kept answer, another body is refused. */
export function replayOf(kept: IdempotencyRecord, fingerprint: string): Replay {
  if (kept.fingerprint !== fingerprint) return keyReused();
  return { kind: 'replayed', answer: { status: kept.status, body: kept.body, location: kept.location } };
}

/** The record a successful create keeps under its key: the answer its outcome gets. */
export function keptRecord<Outcome>(key: KeyedRequest<Outcome>, outcome: Outcome, now: number): IdempotencyRecord {
  const answer = key.answerOf(outcome);
  return {
    fingerprint: key.fingerprint,
    status: answer.status,
    body: answer.body,
    location: answer.location,
    expiresAt: now + IDEMPOTENCY_TTL_MS,
  };
}
