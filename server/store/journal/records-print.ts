/**
 * A print of data files by the frames of their records (each one's length
 * and checksum, in order), read without the payloads: the index cache
 * (index-cache.ts) keeps the print of the files it was written over, and
 * recovery makes the same print as it replays them, so that a cache is
 * taken only over the very records it was made from.
 */
import { crc32 } from 'node:zlib';

/** The print of the records so far, `print`, with the frame of the record at `at` of `buf` (codec.ts: length, CRC). */
export function withRecordAt(print: number, buf: Buffer, at: number): number {
  const length = buf.readUInt32LE(at);
  return (Math.imul(print ^ buf.readUInt32LE(at + 4), 0x01000193) ^ length) >>> 0;
}

/** The print of the files so far, `print`, with one more file named `name`, whose records print `records`. */
export function withFile(print: number, name: string, records: number): number {
  return crc32(`${name} ${records}`, print);
}
