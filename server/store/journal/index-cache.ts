/**
 * `<data>/index-cache`: the entries of the declared fields' indexes as they
 * stood at a point of the journals, written when the store closes, so that
 * the next start reads them instead of parsing and sorting every user; the
 * users written after the point (recovery collects them) are entered
 * again. A compaction writes it too, at the start of the journal it begins,
 * without holding the event loop. A cache only: a start takes it when every
 * check holds (its own checksum, the records it was written over, the key
 * encoding) and builds the indexes as it would without it otherwise.
 *
 * Layout: each list of entries in segments of at most SEGMENT_PARTS parts,
 * each segment its ids (int32 or float64), the length of each run of equal
 * keys (uint32), each run key's length in UTF-16 units (uint32), and the
 * run keys as one text (UTF-8, or UTF-16 where a key holds a lone
 * surrogate), each part padded to 8 bytes; then the header (JSON) and zeros
 * to 8 bytes; then the header's length and the CRC-32 of every byte before
 * the CRC (both uint32, little-endian).
 */
import { closeSync, constants, existsSync, fstatSync, openSync, readdirSync, readSync, rmSync } from 'node:fs';
import { endianness } from 'node:os';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import {
  fsyncDir,
  isTempNameOf,
  removeFileSync,
  replaceFileSoon,
  replaceFileSync,
  tempPathFor,
} from '../../ops/durable-files.js';
import { checkDeclarations, type FieldDeclaration } from '../../users/declared-fields.js';
import { userKeysOf } from '../../users/index-key.js';
import type { SavedIndex } from '../memory/field-indexes.js';
import { CHUNK, type EntryList } from '../memory/sorted-entries.js';
import { FRAME_BYTES, HEADER_BYTES } from './codec.js';
import { withFile, withRecordAt } from './records-print.js';
import { journalName, listDataFiles, snapshotName, type JournalPoint } from './recovery.js';

export const INDEX_CACHE_FILE = 'index-cache';
const FORMAT = 1;
/** The bytes of a data file read at once for its print. */
const PRINT_CHUNK = 4 * 1024 * 1024;

interface ListShape {
  entries: number;
  runs: number;
  textBytes: number;
  utf16: boolean;
  /** 4 (int32) when every id is below SMALL_ID, else 8 (float64). */
  idBytes: number;
}

interface Header {
  format: number;
  keys: number;
  unicode: string;
  endian: string;
  point: JournalPoint;
  files: number;
  /** Each index's lists (its sort entries, and its keys where they differ), each in segments. */
  indexes: { field: FieldDeclaration; lists: ListShape[][] }[];
}

/** After the header: its length in bytes and the CRC-32 of every byte before the CRC. */
const TRAILER_BYTES = 8;
/** The parts of a list a segment holds: encoded in a few milliseconds, so a background write yields between them. */
const SEGMENT_PARTS = 16;

/** A cache that passed its checks against the data files: where it was written, its fields, and its indexes. */
export interface IndexCache {
  point: JournalPoint;
  /** The print of the data files up to the point (records-print.ts), which recovery makes again. */
  files: number;
  fields: FieldDeclaration[];
  /** The indexes, or undefined when the lists do not add up to what the header says. */
  read(): SavedIndex[] | undefined;
}

/**
 * The print of the key encoding this version makes: index keys of values
 * that tell encodings and lowercasings apart. A cache written by a version
 * that made other keys is not taken.
 */
function keysPrint(): number {
  const probe = { v: [null, true, false, 0, -1.5, 1e21, 'Ab', 'ÀÉİẞ', 'ᲐΣ', '😀', [2, 'x']] };
  const keys = [false, true].map((fold) => userKeysOf(probe, ['v'], fold));
  return crc32(JSON.stringify(keys));
}

/**
 * The print of the data files a start replays up to `point`, as recovery
 * makes it (records-print.ts); undefined when the files do not run through
 * the point.
 */
function filesPrint(dir: string, point: JournalPoint): number | undefined {
  const { journals, snapshots } = listDataFiles(dir);
  const base = snapshots.at(-1) ?? 0;
  if (point.generation < base || !journals.includes(point.generation)) return undefined;
  const names = [
    ...(base > 0 ? [snapshotName(base)] : []),
    ...journals.filter((g) => g >= base && g <= point.generation).map(journalName),
  ];
  let print = 0;
  for (const name of names) {
    const records = recordsPrint(join(dir, name), name === journalName(point.generation) ? point.end : undefined);
    if (records === undefined) return undefined;
    print = withFile(print, name, records);
  }
  return print;
}

/**
 * A print of the frames of the records of the file at `path`, from its
 * header to `end` (its length when undefined), read without their
 * payloads; undefined when the records do not end exactly there.
 */
function recordsPrint(path: string, end: number | undefined): number | undefined {
  const fd = openSync(path, 'r');
  try {
    const size = end ?? fstatSync(fd).size;
    const chunk = Buffer.allocUnsafe(PRINT_CHUNK);
    let print = 0;
    let offset = HEADER_BYTES;
    while (offset < size) {
      const got = readSync(fd, chunk, 0, Math.min(PRINT_CHUNK, size - offset), offset);
      let at = 0;
      for (; at + FRAME_BYTES <= got; at += FRAME_BYTES + chunk.readUInt32LE(at)) {
        if (chunk.readUInt32LE(at) === 0) return undefined;
        print = withRecordAt(print, chunk, at);
      }
      // No whole frame where one should start: the records stop short of `size`.
      if (at === 0) return undefined;
      // The next frame starts at `at`, in this chunk or past it.
      offset += at;
    }
    return offset === size ? print : undefined;
  } finally {
    closeSync(fd);
  }
}

/** Zeros that bring `bytes` to a multiple of 8. */
function padding(bytes: number): Buffer {
  return Buffer.alloc((8 - (bytes % 8)) % 8);
}

/** The largest id kept in 4 bytes: below it, an id is a small integer to V8 too, so arrays of them stay compact. */
const SMALL_ID = 2 ** 30;

function encodeSegment(parts: readonly EntryList[]): { shape: ListShape; parts: Buffer[] } {
  const all = new Float64Array(parts.reduce((sum, part) => sum + part.ids.length, 0));
  let entry = 0;
  for (const part of parts) for (const id of part.ids) all[entry++] = id;
  const small = all.every((id) => id < SMALL_ID);
  const ids = small ? Int32Array.from(all) : all;
  const counts = new Uint32Array(all.length);
  const lengths = new Uint32Array(all.length);
  const runKeys: string[] = [];
  let previous: string | undefined;
  let runs = 0;
  for (const part of parts)
    for (const key of part.keys) {
      if (key === previous) counts[runs - 1]!++;
      else {
        lengths[runs] = key.length;
        counts[runs++] = 1;
        runKeys.push(key);
        previous = key;
      }
    }
  const joined = runKeys.join('');
  const utf16 = !joined.isWellFormed();
  const text = Buffer.from(joined, utf16 ? 'utf16le' : 'utf8');
  const buffers = [
    Buffer.from(ids.buffer),
    Buffer.from(counts.buffer, 0, runs * 4),
    Buffer.from(lengths.buffer, 0, runs * 4),
    text,
  ].flatMap((part) => [part, padding(part.length)]);
  return {
    shape: { entries: all.length, runs, textBytes: text.length, utf16, idBytes: small ? 4 : 8 },
    parts: buffers,
  };
}

/**
 * The bytes of the cache of `saved` at `point` over files that print
 * `files`, a segment at a time (a few milliseconds of work each), the
 * header and trailer last.
 */
function* cachePieces(point: JournalPoint, files: number, saved: readonly SavedIndex[]): Generator<Buffer[]> {
  let crc = 0;
  const indexes = [];
  for (const { field, sorted, keys } of saved) {
    const lists: ListShape[][] = [];
    for (const list of keys === undefined ? [sorted] : [sorted, keys]) {
      const segments: ListShape[] = [];
      for (let at = 0; at < list.length; at += SEGMENT_PARTS) {
        const { shape, parts } = encodeSegment(list.slice(at, at + SEGMENT_PARTS));
        segments.push(shape);
        for (const part of parts) crc = crc32(part, crc);
        yield parts;
      }
      lists.push(segments);
    }
    indexes.push({ field, lists });
  }
  const header: Header = {
    format: FORMAT,
    keys: keysPrint(),
    unicode: process.versions.unicode ?? '',
    endian: endianness(),
    point,
    files,
    indexes,
  };
  const line = Buffer.from(JSON.stringify(header));
  const trailer = Buffer.alloc(TRAILER_BYTES);
  trailer.writeUInt32LE(line.length);
  const pad = padding(line.length);
  trailer.writeUInt32LE(crc32(trailer.subarray(0, 4), crc32(pad, crc32(line, crc))), 4);
  yield [line, pad, trailer];
}

/**
 * Writes the cache of `saved`, the indexes as they stand at `point` (every
 * write up to it durable, none after it applied), atomically. With no
 * index, removes it.
 */
export function writeIndexCache(dir: string, point: JournalPoint, saved: readonly SavedIndex[]): void {
  const files = filesPrint(dir, point);
  if (saved.length === 0 || files === undefined) {
    removeIndexCache(dir);
    return;
  }
  replaceFileSync(dir, join(dir, INDEX_CACHE_FILE), [...cachePieces(point, files, saved)].flat(), 0o600);
}

/**
 * The same, for a point compaction made (the start of a journal, over a
 * snapshot whose records print `files`), while the server serves: a segment
 * is encoded between one write and the next, and the file takes its name
 * once it is whole and synced. Gives up (false, its temp file removed) as
 * soon as `wanted` says the cache is no longer wanted.
 */
export async function writeIndexCacheSoon(
  dir: string,
  point: JournalPoint,
  files: number,
  saved: readonly SavedIndex[],
  wanted: () => boolean,
): Promise<boolean> {
  const path = join(dir, INDEX_CACHE_FILE);
  const fill = async (write: (data: Buffer) => Promise<void>) => {
    for (const buffers of cachePieces(point, files, saved)) {
      if (!wanted()) return false;
      for (const buffer of buffers) await write(buffer);
    }
    return true;
  };
  const written = await replaceFileSoon(tempPathFor(path), path, 0o600, fill, wanted);
  if (written) await fsyncDir(dir);
  return written;
}

/** Removes the cache, if there is one. */
export function removeIndexCache(dir: string): void {
  const path = join(dir, INDEX_CACHE_FILE);
  if (existsSync(path)) removeFileSync(dir, path);
}

/**
 * The cache of `dir` when every check holds against this version and the
 * data files as they are now; why not, in a few words, when one does not;
 * undefined when there is none. Removes what a write of it cut short left.
 */
export function readIndexCache(dir: string): IndexCache | { refused: string } | undefined {
  for (const name of readdirSync(dir))
    if (isTempNameOf(name, INDEX_CACHE_FILE)) rmSync(join(dir, name), { force: true, recursive: true });
  let file: Buffer;
  try {
    file = readPlainFile(join(dir, INDEX_CACHE_FILE));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    return { refused: `it cannot be read (${(error as Error).message})` };
  }
  const end = file.length - TRAILER_BYTES;
  if (end < 0 || crc32(file.subarray(0, file.length - 4)) !== file.readUInt32LE(end + 4))
    return { refused: 'it fails its checksum' };
  const headerBytes = file.readUInt32LE(end);
  const headerAt = end - headerBytes - padding(headerBytes).length;
  const header = headerAt < 0 ? undefined : headerOf(file.toString('utf8', headerAt, headerAt + headerBytes));
  if (header === undefined) return { refused: 'another version of users-server wrote it' };
  return {
    point: header.point,
    files: header.files,
    fields: header.indexes.map((i) => i.field),
    read: () => decodeIndexes(file.subarray(0, headerAt), header),
  };
}

/**
 * The bytes of the regular file `path`, in memory of their own (typed
 * arrays read them in place); a link, a FIFO or a device is refused.
 */
function readPlainFile(path: string): Buffer {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new Error('not a regular file');
    const file = Buffer.allocUnsafeSlow(stat.size);
    let read = 0;
    while (read < file.length) {
      const got = readSync(fd, file, read, file.length - read, read);
      if (got === 0) throw new Error('the file shrank while it was read');
      read += got;
    }
    return file;
  } finally {
    closeSync(fd);
  }
}

/** The header in `text` when it is well formed and one this version reads and wrote with the same keys. */
function headerOf(text: string): Header | undefined {
  let header: Header;
  try {
    header = JSON.parse(text) as Header;
  } catch {
    return undefined;
  }
  const current =
    typeof header === 'object' &&
    header !== null &&
    header.format === FORMAT &&
    header.keys === keysPrint() &&
    header.unicode === (process.versions.unicode ?? '') &&
    header.endian === endianness() &&
    isCount(header.point?.generation) &&
    isCount(header.point.end) &&
    Number.isInteger(header.files) &&
    Array.isArray(header.indexes) &&
    header.indexes.every(isIndexShape);
  if (!current || typeof checkDeclarations(header.indexes.map((i) => i.field)) === 'string') return undefined;
  return header;
}

function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

function isIndexShape(index: unknown): boolean {
  const { lists } = (index ?? {}) as { lists?: unknown };
  const isSegments = (list: unknown) => Array.isArray(list) && list.every(isListShape);
  return Array.isArray(lists) && lists.length >= 1 && lists.length <= 2 && lists.every(isSegments);
}

function isListShape(list: unknown): boolean {
  const shape = (list ?? {}) as Partial<ListShape>;
  return (
    isCount(shape.entries) &&
    isCount(shape.runs) &&
    shape.runs <= shape.entries &&
    isCount(shape.textBytes) &&
    typeof shape.utf16 === 'boolean' &&
    (shape.idBytes === 4 || shape.idBytes === 8)
  );
}

/** The indexes of the lists that make `body`; undefined when they do not add up to the header. */
function decodeIndexes(body: Buffer, header: Header): SavedIndex[] | undefined {
  const reader = listReader(body, 0);
  const list = (segments: ListShape[]) => segments.flatMap(reader.list);
  try {
    const indexes = header.indexes.map(({ field, lists }) => {
      const [sorted, keys] = lists.map(list);
      return { field, sorted: sorted!, keys };
    });
    return reader.at() === body.length ? indexes : undefined;
  } catch {
    // A list that runs past the end, or runs that do not cover its entries.
    return undefined;
  }
}

/** A reader of the lists of entries in order from `start`, and where it is. */
function listReader(file: Buffer, start: number) {
  let at = start;
  const part = (bytes: number) => {
    const from = at;
    at += bytes + padding(bytes).length;
    if (at > file.length) throw new RangeError('the lists run past the end of the file');
    return file.byteOffset + from;
  };
  const list = (shape: ListShape): EntryList[] => {
    const idsAt = part(shape.entries * shape.idBytes);
    const ids =
      shape.idBytes === 4
        ? new Int32Array(file.buffer, idsAt, shape.entries)
        : new Float64Array(file.buffer, idsAt, shape.entries);
    const counts = new Uint32Array(file.buffer, part(shape.runs * 4), shape.runs);
    const lengths = new Uint32Array(file.buffer, part(shape.runs * 4), shape.runs);
    const textAt = part(shape.textBytes) - file.byteOffset;
    const text = file.toString(shape.utf16 ? 'utf16le' : 'utf8', textAt, textAt + shape.textBytes);
    return expand(text, counts, lengths, ids);
  };
  return { list, at: () => at };
}

/**
 * The entries of runs of equal keys, in parts of CHUNK (as SortedEntries
 * keeps them): each run's key cut from `text` once, shared by its entries.
 */
function expand(text: string, counts: Uint32Array, lengths: Uint32Array, ids: Int32Array | Float64Array): EntryList[] {
  const parts: EntryList[] = [];
  // Parts made at their size: arrays grown by push keep room they never use.
  const newPart = (): EntryList => {
    const size = Math.min(CHUNK, ids.length - entry);
    return { keys: new Array<string>(size), ids: new Array<number>(size) };
  };
  let entry = 0;
  let char = 0;
  let part = newPart();
  let at = 0;
  for (let run = 0; run < counts.length; run++) {
    const key = text.slice(char, char + lengths[run]!);
    char += lengths[run]!;
    for (let n = counts[run]!; n > 0 && entry < ids.length; n--) {
      if (at === part.keys.length) {
        parts.push(part);
        part = newPart();
        at = 0;
      }
      part.keys[at] = key;
      part.ids[at++] = ids[entry++]!;
    }
  }
  if (entry !== ids.length || char !== text.length || at !== part.keys.length)
    throw new RangeError('the runs do not cover the entries');
  if (at > 0) parts.push(part);
  return parts;
}
