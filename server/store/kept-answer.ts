/**
 * The answers a store keeps under an Idempotency-Key (API.md "Reservations
 * and Idempotency-Key"). A replay answers as the first request did, so the
 * journal and the database keep the answer serialized (status, body,
 * Location), written in the same atomic step as the create; this is the one
 * place that builds it.
 */
import { userPath } from '../../shared/endpoints.js';
import { IDEMPOTENCY_TTL_MS, keyReused, type IdempotencyKey, type Refusal } from '../users/rules.js';

/** A first response kept for its Idempotency-Key, replayed as it was. */
export interface KeptAnswer {
  readonly status: number;
  readonly body: string;
  readonly location: string | undefined;
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

/** The record a successful create keeps under its key. */
export function keptRecord(key: IdempotencyKey, answer: KeptAnswer, now: number): IdempotencyRecord {
  return {
    fingerprint: key.fingerprint,
    status: answer.status,
    body: answer.body,
    location: answer.location,
    expiresAt: now + IDEMPOTENCY_TTL_MS,
  };
}

/** The 201 to POST /users/new: the user as stored, at its new address. */
export function createdAnswer(id: number, json: string): KeptAnswer {
  return { status: 201, body: json, location: userPath(id) };
}

/** The 201 to POST /users/reservations: the id and when its hold ends. */
export function reservationAnswer(id: number, expiresAt: number): KeptAnswer {
  return {
    status: 201,
    body: JSON.stringify({ id, expiresAt: new Date(expiresAt).toISOString() }),
    location: userPath(id),
  };
}
