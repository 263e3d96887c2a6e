/**
 * A snapshot: the whole state at one instant, written while the server keeps
 * serving. `captureImage` copies references (user records are replaced on
 * every write, never changed in place), so it costs a pointer copy per user;
 * the writing happens afterwards in ~1 MiB records, one asynchronous write
 * each, so the event loop is never held for long.
 */
import {
  encodeChange,
  encodeChangeNumbers,
  encodeEnd,
  encodeHeader,
  encodeIssued,
  encodeMutation,
  encodeRecord,
  encodeRedirect,
  FileKind,
} from './codec.js';
import type { SavedIndex } from '../memory/field-indexes.js';
import type { StoreState } from '../memory/state.js';
import { replaceFileSoon } from '../../ops/durable-files.js';
import type { StoredUser } from '../../users/rules.js';
import type { IdempotencyRecord } from '../kept-answer.js';
import type { ApiTokenRecord, Change } from '../store.js';

export interface Image {
  lastId: number;
  claimed: number[];
  users: StoredUser[];
  redirects: [number, number][];
  reservations: [number, number][];
  idempotency: [string, IdempotencyRecord][];
  revoked: [string, number][];
  tokens: ApiTokenRecord[];
  /** The feed of changes: its numbers and the changes it keeps. */
  changes: { lastSeq: number; trimmedThrough: number; kept: Change[] };
  /** Set by compaction: the declared fields' entries at the same instant (copies: writes change the live ones). */
  indexes?: SavedIndex[] | undefined;
}

const CHUNK_CHARS = 1024 * 1024;

/** The live state now, in id order, without expired entries. */
export function captureImage(state: StoreState, now: number): Image {
  const users = new Array<StoredUser>(state.sortedIds.length);
  for (let i = 0; i < users.length; i++) users[i] = state.users.get(state.sortedIds[i]!)!;
  return {
    lastId: state.lastId,
    claimed: [...state.claimedIds()],
    users,
    redirects: [...state.moved],
    reservations: [...state.reservations].filter(([, expiresAt]) => expiresAt > now),
    idempotency: [...state.idempotency].filter(([, record]) => record.expiresAt > now),
    revoked: [...state.revokedSessions].filter(([, expiresAt]) => expiresAt > now),
    tokens: [...state.tokens.values()],
    changes: {
      lastSeq: state.changes.lastSeq,
      trimmedThrough: state.changes.trimmedThrough,
      kept: state.changes.kept(),
    },
  };
}

/** The image as payload chunks: issued ids first, so replaying users never moves the high-water mark. */
function* imageChunks(image: Image): Generator<string> {
  let chunk = encodeIssued(image.lastId, image.claimed);
  const add = function* (line: string) {
    if (chunk.length + line.length >= CHUNK_CHARS) {
      yield chunk;
      chunk = line;
    } else chunk += '\n' + line;
  };
  for (const user of image.users)
    yield* add(encodeMutation({ op: 'put', id: user.id, alias: user.alias, json: user.json }));
  for (const [from, to] of image.redirects) yield* add(encodeRedirect(from, to));
  for (const [id, expiresAt] of image.reservations) yield* add(encodeMutation({ op: 'reserve', id, expiresAt }));
  for (const [key, record] of image.idempotency) yield* add(encodeMutation({ op: 'idempotency', key, record }));
  for (const [sessionId, expiresAt] of image.revoked)
    yield* add(encodeMutation({ op: 'revoke', sessionId, expiresAt }));
  for (const token of image.tokens) yield* add(encodeMutation({ op: 'token', token }));
  yield* add(encodeChangeNumbers(image.changes.lastSeq, image.changes.trimmedThrough));
  for (const change of image.changes.kept) yield* add(encodeChange(change));
  yield* add(encodeEnd(image.users.length));
  yield chunk;
}

/**
 * Writes the image to `temp`, fsyncs it and renames it to `path`, and
 * shows `written` each record (frame included). The caller fsyncs the
 * directory. On failure the temp file is removed.
 */
export async function writeSnapshot(
  image: Image,
  generation: number,
  temp: string,
  path: string,
  written?: (record: Buffer) => void,
): Promise<number> {
  let size = 0;
  await replaceFileSoon(temp, path, 0o600, async (write) => {
    const header = encodeHeader(FileKind.Snapshot, generation);
    await write(header);
    size += header.length;
    for (const chunk of imageChunks(image)) {
      const record = encodeRecord(chunk);
      await write(record);
      written?.(record);
      size += record.length;
    }
    return true;
  });
  return size;
}
