/**
 * The on-disk format shared by journals and snapshots (docs/storage.md).
 *
 * A file is a 16-byte header followed by framed records:
 *
 *     header:  magic "\x89USR\r\n\x1a\n" | u16 version | u16 kind | u32 generation
 *     record:  u32 length | u32 CRC-32 of (length bytes + payload) | payload
 *
 * All integers are little-endian. The checksum covers the length field too,
 * so a zero-filled tail (length 0, checksum 0) or garbage never parses as a
 * record: CRC-32 of four zero bytes is not zero, and an empty payload is
 * never written. The magic's CR LF and ^Z catch a file mangled by a text-mode
 * copy, as PNG's do.
 *
 * A payload is UTF-8 text, one entry per line, fields separated by tabs. No
 * field can hold a tab or a newline: representations are JSON.stringify
 * output (control characters escaped), aliases and Idempotency-Keys are
 * restricted to visible ASCII, session ids are base64url. A journal record is
 * one commit (all its lines apply, or none); a snapshot record is a chunk of
 * the state.
 */
import { crc32 } from 'node:zlib';
import { DataError } from '../../errors.js';
import type { IdempotencyRecord } from '../kept-answer.js';
import type { Mutation, StoreState } from '../memory/state.js';
import type { ApiTokenRecord, Change } from '../store.js';

const MAGIC = Buffer.from([0x89, 0x55, 0x53, 0x52, 0x0d, 0x0a, 0x1a, 0x0a]);
/**
 * Format 2 added API tokens (entries `t` and `x`), format 3 the changes a
 * snapshot keeps for the feed of changes (`q` and `c`). This version reads
 * formats 1 to 3 and writes 3; a directory of an older format is upgraded
 * on start (journal.ts).
 */
export const FORMAT_VERSION = 3;
const OLDEST_FORMAT_VERSION = 1;
export const HEADER_BYTES = 16;
export const FRAME_BYTES = 8;
/**
 * Larger lengths are damage. A snapshot chunk is about 1 MiB; the largest
 * commit is a create under an Idempotency-Key with a --max-body (at most
 * 64 MiB) body: the representation plus its escaped copy in the kept
 * response, well under this.
 */
const MAX_RECORD_BYTES = 256 * 1024 * 1024;

export const FileKind = { Journal: 1, Snapshot: 2 } as const;
export type FileKind = (typeof FileKind)[keyof typeof FileKind];

export function encodeHeader(kind: FileKind, generation: number): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  MAGIC.copy(header, 0);
  header.writeUInt16LE(FORMAT_VERSION, 8);
  header.writeUInt16LE(kind, 10);
  header.writeUInt32LE(generation, 12);
  return header;
}

/**
 * A header of a format newer than this build reads: the operator must
 * upgrade users-server, never repair (which would drop the file). Throws
 * DataError; returns quietly for any other header.
 */
export function refuseNewerFormat(header: Buffer, name: string): void {
  if (header.length < HEADER_BYTES || !header.subarray(0, MAGIC.length).equals(MAGIC)) return;
  const version = header.readUInt16LE(8);
  if (version > FORMAT_VERSION) {
    throw new DataError(
      `${name} was written by format ${version}; this users-server reads up to format ${FORMAT_VERSION}; upgrade users-server to start on it (nothing was changed)`,
    );
  }
}

/** The format version in a header already checked. */
export function headerVersion(header: Buffer): number {
  return header.readUInt16LE(8);
}

/** Why a header is unusable, or undefined when it is a header of `kind` and `generation`. */
export function checkHeader(header: Buffer, kind: FileKind, generation: number): string | undefined {
  if (header.length < HEADER_BYTES || !header.subarray(0, MAGIC.length).equals(MAGIC))
    return 'not a users-server data file (bad magic)';
  const version = header.readUInt16LE(8);
  if (version < OLDEST_FORMAT_VERSION || version > FORMAT_VERSION)
    return `format version ${version}; this server reads versions ${OLDEST_FORMAT_VERSION} to ${FORMAT_VERSION}`;
  if (header.readUInt16LE(10) !== kind) return `not a ${kind === FileKind.Journal ? 'journal' : 'snapshot'} file`;
  if (header.readUInt32LE(12) !== generation)
    return `its header says generation ${header.readUInt32LE(12)}, its name ${generation}`;
  return undefined;
}

/** Frames a payload: length, checksum, bytes. */
export function encodeRecord(payload: string): Buffer {
  const length = Buffer.byteLength(payload);
  if (length > MAX_RECORD_BYTES) throw recordTooLarge(length);
  const record = Buffer.allocUnsafe(FRAME_BYTES + length);
  writeRecord(record, 0, payload);
  return record;
}

/**
 * Throws when `payload` would make a record recovery refuses, which must
 * never be acknowledged. Its UTF-16 length bounds its bytes (`recordBound`),
 * so the bytes are counted only for a payload that could be too long.
 */
export function checkRecordSize(payload: string): void {
  if (payload.length * 3 <= MAX_RECORD_BYTES) return;
  const length = Buffer.byteLength(payload);
  if (length > MAX_RECORD_BYTES) throw recordTooLarge(length);
}

function recordTooLarge(length: number): RangeError {
  return new RangeError(`a ${length}-byte record exceeds the journal's ${MAX_RECORD_BYTES}-byte limit`);
}

/** The most bytes the record of `payload` can take: a UTF-16 unit is at most 3 bytes of UTF-8. */
export function recordBound(payload: string): number {
  return FRAME_BYTES + payload.length * 3;
}

/**
 * Writes the record of `payload` into `buf` at `offset`, which has room
 * for `recordBound(payload)` bytes; returns the bytes it took. The UTF-8
 * text is written once and its length is what the write returns; the
 * checksum of the payload's text is that of its UTF-8 bytes, and the
 * length's is four table steps: one native call, no views of the buffer.
 */
export function writeRecord(buf: Buffer, offset: number, payload: string): number {
  const length = buf.write(payload, offset + FRAME_BYTES);
  buf.writeUInt32LE(length, offset);
  buf.writeUInt32LE(crc32(payload, lengthCrc(length)), offset + 4);
  return FRAME_BYTES + length;
}

/** zlib.crc32 of `length` as four little-endian bytes. */
function lengthCrc(length: number): number {
  const t = CRC_TABLE;
  let c = ~0;
  c = t[(c ^ length) & 0xff]! ^ (c >>> 8);
  c = t[(c ^ (length >>> 8)) & 0xff]! ^ (c >>> 8);
  c = t[(c ^ (length >>> 16)) & 0xff]! ^ (c >>> 8);
  c = t[(c ^ (length >>> 24)) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

/**
 * The length of the valid record at `offset` in `buf`, frame included, or 0
 * when the bytes there are not a whole, intact record.
 */
export function recordAt(buf: Buffer, offset: number): number {
  if (buf.length - offset < FRAME_BYTES) return 0;
  const length = buf.readUInt32LE(offset);
  if (length === 0 || length > MAX_RECORD_BYTES || buf.length - offset - FRAME_BYTES < length) return 0;
  const start = offset + FRAME_BYTES;
  const sum =
    length < SMALL_RECORD
      ? crc32Bytes(buf, start, start + length, crc32Bytes(buf, offset, offset + 4, 0))
      : crc32(buf.subarray(start, start + length), crc32(buf.subarray(offset, offset + 4)));
  return sum === buf.readUInt32LE(offset + 4) ? FRAME_BYTES + length : 0;
}

// A native call costs more than computing a small record's CRC in place: a
// journal of a million one-user records verifies about 1 s faster this way.
const SMALL_RECORD = 4096;
const CRC_TABLE = makeCrcTable();

/** Slice-by-4 tables of the CRC-32 of zlib (reflected polynomial 0xEDB88320). */
function makeCrcTable(): Int32Array {
  const table = new Int32Array(1024);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c;
  }
  for (let n = 0; n < 256; n++) {
    let c = table[n]!;
    for (let k = 1; k < 4; k++) {
      c = table[c & 0xff]! ^ (c >>> 8);
      table[k * 256 + n] = c;
    }
  }
  return table;
}

/** zlib.crc32 of buf[start..end), continuing from `previous`, without a native call. */
export function crc32Bytes(buf: Buffer, start: number, end: number, previous: number): number {
  const t = CRC_TABLE;
  let c = ~previous;
  let i = start;
  for (; i + 4 <= end; i += 4) {
    c ^= buf[i]! | (buf[i + 1]! << 8) | (buf[i + 2]! << 16) | (buf[i + 3]! << 24);
    c = t[768 + (c & 0xff)]! ^ t[512 + ((c >>> 8) & 0xff)]! ^ t[256 + ((c >>> 16) & 0xff)]! ^ t[c >>> 24]!;
  }
  for (; i < end; i++) c = t[(c ^ buf[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

// One letter per entry kind. The last three appear in snapshots only.
const PUT = 'p';
const DELETE = 'd';
const MOVE = 'm';
const RESERVE = 'r';
const IDEMPOTENCY = 'i';
const REVOKE = 's';
const TOKEN = 't';
const TOKEN_REVOKE = 'x';
const ISSUED = 'n';
const REDIRECT = 'o';
const END = 'e';
const CHANGE_NUMBERS = 'q';
const CHANGE = 'c';
const TRIM_CHANGES = 'k';

/** The payload of one journal record: a commit's mutations, a line each. */
export function encodeMutations(mutations: readonly Mutation[]): string {
  let text = '';
  for (let i = 0; i < mutations.length; i++) {
    if (i > 0) text += '\n';
    text += encodeMutation(mutations[i]!);
  }
  return text;
}

export function encodeMutation(m: Mutation): string {
  switch (m.op) {
    case 'put':
      return `${PUT}\t${m.id}\t${m.alias ?? ''}\t${m.json}`;
    case 'delete':
      return `${DELETE}\t${m.id}`;
    case 'move':
      return `${MOVE}\t${m.from}\t${m.to}\t${m.json}`;
    case 'reserve':
      return `${RESERVE}\t${m.id}\t${m.expiresAt}`;
    case 'idempotency':
      return `${IDEMPOTENCY}\t${m.key}\t${JSON.stringify(m.record)}`;
    case 'revoke':
      return `${REVOKE}\t${m.sessionId}\t${m.expiresAt}`;
    case 'token':
      return `${TOKEN}\t${JSON.stringify({ ...m.token, expiresAt: m.token.expiresAt ?? null })}`;
    case 'token-revoke':
      return `${TOKEN_REVOKE}\t${m.id}`;
    case 'trim-changes':
      return `${TRIM_CHANGES}\t${m.through}`;
  }
}

/** Snapshot entries that are not mutations: the id high-water mark, an old id's redirect, the end mark. */
export function encodeIssued(lastId: number, claimed: Iterable<number>): string {
  return `${ISSUED}\t${lastId}\t${[...claimed].join(',')}`;
}

export function encodeRedirect(from: number, to: number): string {
  return `${REDIRECT}\t${from}\t${to}`;
}

/** Snapshot entries of the feed of changes: its numbers, then each kept change. */
export function encodeChangeNumbers(lastSeq: number, trimmedThrough: number): string {
  return `${CHANGE_NUMBERS}\t${lastSeq}\t${trimmedThrough}`;
}

export function encodeChange(c: Change): string {
  return `${CHANGE}\t${c.seq}\t${c.at}\t${c.op}\t${c.id}\t${c.from ?? ''}\t${c.json ?? ''}`;
}

export function encodeEnd(users: number): string {
  return `${END}\t${users}`;
}

/**
 * Applies the payload in buf[start..end) to `state`. Returns the user count
 * of an end mark, or undefined. A payload that passed its checksum but does
 * not parse was written by something else: DataError.
 *
 * Puts, nearly every line of a large journal or snapshot, are read straight
 * from the bytes: no line string, no field array, one string per user.
 */
export function applyPayload(
  state: StoreState,
  buf: Buffer,
  start: number,
  end: number,
  kind: FileKind,
  at?: number,
): number | undefined {
  let mark: number | undefined;
  let line = start;
  while (line <= end) {
    const stop = applyPut(state, buf, line, end, at);
    if (stop !== -1) {
      line = stop + 1;
      continue;
    }
    let lineEnd = buf.indexOf(NEWLINE, line);
    if (lineEnd === -1 || lineEnd > end) lineEnd = end;
    const m = applyLine(state, buf.toString('utf8', line, lineEnd), kind, at);
    if (m !== undefined) mark = m;
    line = lineEnd + 1;
  }
  return mark;
}

const NEWLINE = 0x0a;
const TAB = 0x09;
const P = 0x70;
const ZERO = 0x30;
const NINE = 0x39;

/**
 * Applies the line at `line` if it is a well-formed put (`p`, canonical id,
 * alias, representation) and returns where it ends; else -1, and the line
 * takes the general path, which also reports what is wrong with it.
 */
function applyPut(state: StoreState, buf: Buffer, line: number, end: number, changedAt: number | undefined): number {
  if (buf[line] !== P || buf[line + 1] !== TAB || buf[line + 2] === ZERO) return -1;
  let at = line + 2;
  let id = 0;
  for (; at < end && buf[at]! >= ZERO && buf[at]! <= NINE; at++) id = id * 10 + buf[at]! - ZERO;
  if (at === line + 2 || at - line - 2 > 16 || !Number.isSafeInteger(id) || at >= end || buf[at] !== TAB) return -1;
  const aliasStart = at + 1;
  let aliasEnd = aliasStart;
  while (aliasEnd < end && buf[aliasEnd] !== TAB && buf[aliasEnd] !== NEWLINE) aliasEnd++;
  if (aliasEnd >= end || buf[aliasEnd] !== TAB) return -1;
  let stop = aliasEnd + 1;
  while (stop < end && buf[stop] !== TAB && buf[stop] !== NEWLINE) stop++;
  if (stop < end && buf[stop] !== NEWLINE) return -1;
  const alias = aliasEnd === aliasStart ? undefined : buf.toString('utf8', aliasStart, aliasEnd);
  state.apply({ op: 'put', id, alias, json: buf.toString('utf8', aliasEnd + 1, stop) }, changedAt);
  return stop;
}

function applyLine(state: StoreState, line: string, kind: FileKind, at: number | undefined): number | undefined {
  const fields = line.split('\t');
  const tag = fields[0];
  switch (tag) {
    case PUT:
      if (fields.length !== 4) break;
      state.apply(
        { op: 'put', id: idField(fields[1]), alias: fields[2] === '' ? undefined : fields[2], json: fields[3]! },
        at,
      );
      return undefined;
    case DELETE:
      if (fields.length !== 2) break;
      state.apply({ op: 'delete', id: idField(fields[1]) }, at);
      return undefined;
    case MOVE:
      if (fields.length !== 4) break;
      state.apply({ op: 'move', from: idField(fields[1]), to: idField(fields[2]), json: fields[3]! }, at);
      return undefined;
    case RESERVE:
      if (fields.length !== 3) break;
      state.apply({ op: 'reserve', id: idField(fields[1]), expiresAt: timeField(fields[2]) });
      return undefined;
    case IDEMPOTENCY:
      if (fields.length !== 3) break;
      state.apply({ op: 'idempotency', key: fields[1]!, record: idempotencyField(fields[2]!) });
      return undefined;
    case REVOKE:
      if (fields.length !== 3) break;
      state.apply({ op: 'revoke', sessionId: fields[1]!, expiresAt: timeField(fields[2]) });
      return undefined;
    case TOKEN:
      if (fields.length !== 2) break;
      state.apply({ op: 'token', token: tokenField(fields[1]!) });
      return undefined;
    case TOKEN_REVOKE:
      if (fields.length !== 2) break;
      state.apply({ op: 'token-revoke', id: fields[1]! });
      return undefined;
    case ISSUED:
      if (kind !== FileKind.Snapshot || fields.length !== 3) break;
      state.restoreIssued(idField(fields[1], 0), fields[2] === '' ? [] : fields[2]!.split(',').map((f) => idField(f)));
      return undefined;
    case REDIRECT:
      if (kind !== FileKind.Snapshot || fields.length !== 3) break;
      state.restoreRedirect(idField(fields[1]), idField(fields[2]));
      return undefined;
    case END:
      if (kind !== FileKind.Snapshot || fields.length !== 2) break;
      return idField(fields[1], 0);
    case TRIM_CHANGES:
      if (fields.length !== 2) break;
      state.apply({ op: 'trim-changes', through: idField(fields[1]) });
      return undefined;
    case CHANGE_NUMBERS:
      if (kind !== FileKind.Snapshot || fields.length !== 3) break;
      state.changes.restoreNumbers(idField(fields[1], 0), idField(fields[2], 0));
      return undefined;
    case CHANGE:
      if (kind !== FileKind.Snapshot || fields.length !== 7 || !state.changes.restore(changeField(fields))) break;
      return undefined;
  }
  throw new DataError(`unreadable entry "${line.slice(0, 40)}"`);
}

/** A snapshot's change line, split at its tabs. */
function changeField(fields: readonly string[]): Change {
  const op = fields[3];
  if (op !== 'put' && op !== 'delete' && op !== 'move') throw new DataError(`bad change "${op}"`);
  const change = { seq: idField(fields[1]), at: timeField(fields[2]), op, id: idField(fields[4]) } as const;
  if (op === 'delete') return change;
  const json = fields[6]!;
  return op === 'move' ? { ...change, from: idField(fields[5]), json } : { ...change, json };
}

function idField(text: string | undefined, min = 1): number {
  const n = Number(text);
  if (text === '' || !Number.isSafeInteger(n) || n < min) throw new DataError(`bad number "${text}"`);
  return n;
}

function timeField(text: string | undefined): number {
  const n = Number(text);
  if (text === '' || !Number.isFinite(n)) throw new DataError(`bad time "${text}"`);
  return n;
}

function tokenField(text: string): ApiTokenRecord {
  let r: Record<string, unknown>;
  try {
    r = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new DataError('bad API token record');
  }
  const { id, name, role, hash, createdBy, createdAt, expiresAt, ownerSince, parent } = r ?? {};
  if (
    typeof id !== 'string' ||
    typeof name !== 'string' ||
    (role !== 'admin' && role !== 'reader') ||
    typeof hash !== 'string' ||
    typeof createdBy !== 'string' ||
    typeof createdAt !== 'number' ||
    (expiresAt !== null && typeof expiresAt !== 'number') ||
    !optionalText(ownerSince) ||
    !optionalText(parent)
  ) {
    throw new DataError('bad API token record');
  }
  return {
    id,
    name,
    role,
    hash,
    createdBy,
    createdAt,
    expiresAt: expiresAt ?? undefined,
    ...(ownerSince !== undefined && { ownerSince }),
    ...(parent !== undefined && { parent }),
  };
}

/** A member that records from before it existed lack. */
function optionalText(value: unknown): value is string | undefined {
  return value === undefined || typeof value === 'string';
}

function idempotencyField(text: string): IdempotencyRecord {
  let r: IdempotencyRecord;
  try {
    r = JSON.parse(text) as IdempotencyRecord;
  } catch {
    throw new DataError('bad idempotency record');
  }
  if (
    typeof r !== 'object' ||
    r === null ||
    typeof r.fingerprint !== 'string' ||
    typeof r.status !== 'number' ||
    typeof r.body !== 'string' ||
    typeof r.expiresAt !== 'number'
  ) {
    throw new DataError('bad idempotency record');
  }
  return {
    fingerprint: r.fingerprint,
    status: r.status,
    body: r.body,
    location: r.location ?? undefined,
    expiresAt: r.expiresAt,
  };
}
