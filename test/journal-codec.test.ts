import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { crc32 } from 'node:zlib';
import { DataError } from '../server/errors.js';
import {
  applyPayload,
  checkRecordSize,
  crc32Bytes,
  encodeMutations,
  encodeRecord,
  FileKind,
  recordAt,
  recordBound,
  writeRecord,
} from '../server/store/journal/codec.js';
import { StoreState, type Mutation } from '../server/store/memory/state.js';
import { UserTable } from '../server/store/memory/user-table.js';
import type { StoredUser } from '../server/users/rules.js';

// The record codec below the journal: the in-place CRC must equal zlib's, and
// the byte-level put parser must read exactly what the encoder wrote.

test('codec: the in-place CRC-32 equals zlib.crc32 for every length up to 300 bytes and any starting value', () => {
  for (let length = 0; length <= 300; length++) {
    const buf = randomBytes(length + 7);
    const previous = (length * 2654435761) >>> 0;
    assert.equal(
      crc32Bytes(buf, 3, 3 + length, previous),
      crc32(buf.subarray(3, 3 + length), previous),
      `length ${length}`,
    );
  }
});

test('codec: records of every size class verify, and any single flipped bit makes them fail', () => {
  for (const size of [1, 100, 4095, 4096, 70_000]) {
    const record = encodeRecord('x'.repeat(size));
    assert.equal(recordAt(record, 0), record.length);
    for (const bit of [0, 37, 64, record.length * 8 - 1]) {
      const copy = Buffer.from(record);
      copy[bit >> 3]! ^= 1 << (bit & 7);
      assert.equal(recordAt(copy, 0), 0, `size ${size}, bit ${bit}`);
    }
  }
});

test('codec: records written one after another into a buffer sized by their bounds (a batch) are the bytes of each record alone, in 1- to 4-byte UTF-8', () => {
  const payloads = [
    'p\t1\t\t{"name":"a","id":1}',
    'Ålice ☃ \u{1F600} \u{10FFFF}',
    '☃'.repeat(1000),
    '\u{1F600}'.repeat(500),
    'x',
  ];
  const buf = Buffer.alloc(payloads.reduce((sum, payload) => sum + recordBound(payload), 0));
  let offset = 0;
  for (const payload of payloads) {
    checkRecordSize(payload);
    offset += writeRecord(buf, offset, payload);
  }
  assert.deepEqual(buf.subarray(0, offset), Buffer.concat(payloads.map(encodeRecord)));
  let at = 0;
  for (const payload of payloads) {
    const length = recordAt(buf, at);
    assert.equal(buf.toString('utf8', at + 8, at + length), payload);
    at += length;
  }
  assert.equal(at, offset);
});

test('codec: a commit read back from its record rebuilds the same state, puts with and without alias, non-ASCII and escaped JSON included', () => {
  const mutations: Mutation[] = [
    { op: 'put', id: 1, alias: 'alice', json: '{"name":"Ålice \\t ☃ \\n","id":1}' },
    { op: 'put', id: 2, json: '{"name":"b","id":2}' },
    { op: 'reserve', id: 3, expiresAt: 1_900_000_000_000 },
    { op: 'put', id: 9_007_199_254_740_991, alias: 'max', json: '{"name":"m","id":9007199254740991}' },
    { op: 'delete', id: 2 },
    { op: 'revoke', sessionId: 'abc_-', expiresAt: 1_900_000_000_000 },
  ];
  const record = encodeRecord(encodeMutations(mutations));
  const fromRecord = new StoreState();
  applyPayload(fromRecord, record, 8, recordAt(record, 0), FileKind.Journal);
  const direct = new StoreState();
  for (const m of mutations) direct.apply(m);
  assert.deepEqual([...fromRecord.users], [...direct.users]);
  assert.deepEqual([...fromRecord.aliases], [...direct.aliases]);
  assert.deepEqual([...fromRecord.reservations], [...direct.reservations]);
  assert.deepEqual([...fromRecord.revokedSessions], [...direct.revokedSessions]);
  assert.equal(fromRecord.users.get(1)!.json, '{"name":"Ålice \\t ☃ \\n","id":1}');
});

test('codec: a put line with a missing field or an unknown entry is a DataError, not a silent skip', () => {
  for (const line of ['p\t1\t{"name":"a"}', 'p\tx\t\t{}', 'q\t1', 'p\t1\t\t{}\textra']) {
    const record = encodeRecord(line);
    assert.throws(() => applyPayload(new StoreState(), record, 8, record.length, FileKind.Journal), DataError, line);
  }
});

test('state: the user table answers like a Map under random sets and deletes of dense, far and in-between ids', () => {
  const table = new UserTable();
  const model = new Map<number, StoredUser>();
  let seed = 42;
  const random = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
  const pick = () =>
    [random(5000) + 1, random(3) === 0 ? 9_007_199_254_740_991 - random(10) : random(40_000) + 1, 20_000 + random(100)][
      random(3)
    ]!;
  for (let step = 0; step < 50_000; step++) {
    const id = pick();
    if (random(4) === 0) assert.equal(table.delete(id), model.delete(id));
    else {
      const user = { id, alias: undefined, json: `{"id":${id},"step":${step}}`, etag: undefined };
      table.set(id, user);
      model.set(id, user);
    }
    const probe = pick();
    assert.equal(table.get(probe), model.get(probe));
    assert.equal(table.size, model.size);
  }
  assert.deepEqual(new Map(table), model);
});
