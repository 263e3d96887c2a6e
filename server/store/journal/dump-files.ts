import { closeSync } from 'node:fs';
import { join } from 'node:path';
import { DataError } from '../../errors.js';
import { fsyncDirSync } from '../../ops/durable-files.js';
import type { StoreDump } from '../dump.js';
import { createJournalSync } from './journal.js';
import { listDataFiles, recover, snapshotName } from './recovery.js';
import { captureImage, writeSnapshot } from './snapshot.js';

/** The data part of a dump: what the journal store holds, without the settings files. */
type StoreData = Omit<
  StoreDump,
  'secrets' | 'adminPassword' | 'adminIdentity' | 'accounts' | 'declarations' | 'schema'
>;

/** What the data directory `dir` holds, read without changing a file; a damaged directory is refused. */
export function readJournalData(dir: string, now: number): StoreData {
  const recovered = recover(dir, { salvage: true });
  if (recovered.damage !== undefined) {
    throw new DataError(
      `${dir} is damaged (${recovered.damage.file} at byte offset ${recovered.damage.offset}): run users-server repair --data ${dir} first`,
    );
  }
  recovered.state.sweep(now);
  const { changes, ...image } = captureImage(recovered.state, now);
  return {
    ...image,
    users: image.users.map((u) => ({ id: u.id, alias: u.alias, json: u.json })),
    lastChange: changes.lastSeq,
  };
}

/** True when `dir` holds no journal or snapshot. */
export function hasJournalData(dir: string): boolean {
  const files = listDataFiles(dir);
  return files.journals.length > 0 || files.snapshots.length > 0;
}

/** Writes `data` into `dir`, which holds no journal yet, as snapshot 1 and an empty journal 1. */
export async function writeJournalData(dir: string, data: StoreData): Promise<void> {
  const { lastChange, ...image } = data;
  const users = image.users.map((u) => ({ ...u, etag: undefined }));
  const changes = { lastSeq: lastChange, trimmedThrough: lastChange, kept: [] };
  await writeSnapshot({ ...image, users, changes }, 1, join(dir, `${snapshotName(1)}.tmp`), join(dir, snapshotName(1)));
  closeSync(createJournalSync(dir, 1));
  fsyncDirSync(dir);
}
