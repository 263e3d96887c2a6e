import { closeSync, copyFileSync, statSync, unlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { envName } from '../ops/config.js';
import { CommandError } from '../errors.js';
import { acquireLock } from '../ops/data-dir.js';
import { fsyncDirSync } from '../ops/durable-files.js';
import { createJournalSync } from '../store/journal/journal.js';
import { journalName, listDataFiles, recover, snapshotName } from '../store/journal/recovery.js';
import { captureImage, writeSnapshot } from '../store/journal/snapshot.js';

export interface RepairIo {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
  env: NodeJS.ProcessEnv;
}

const USAGE = `usage: users-server repair [--data DIR]

Recovers a data directory whose journal or snapshot is damaged. It keeps a
copy of each damaged file (NAME.damaged-TIMESTAMP), replays everything up to
the first damage, writes that state as a new snapshot and journal, and says
what it dropped. Run it with the server stopped. --data defaults to
$${envName('data')}, else ./data.`;

/** `users-server repair`: exit 0 when the directory is usable afterwards, 1 when not, 2 for a bad flag. */
export async function repair(argv: readonly string[], io: RepairIo): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({ args: [...argv], options: { data: { type: 'string' }, help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals: false }));
  } catch (error) {
    io.stderr.write(`users-server repair: ${(error as Error).message.split('\n')[0]} (see --help)\n`);
    return 2;
  }
  if (values.help) {
    io.stdout.write(USAGE + '\n');
    return 0;
  }
  const dir = resolve(values.data ?? io.env[envName('data')] ?? './data');
  let release: () => void;
  try {
    statSync(dir);
    release = acquireLock(dir, (line) => io.stderr.write(line + '\n'));
  } catch (error) {
    const message = error instanceof CommandError ? error.message : `cannot open the data directory ${dir}: ${(error as NodeJS.ErrnoException).code}`;
    io.stderr.write(`users-server repair: ${message}\n`);
    return 1;
  }
  try {
    return await repairLocked(dir, io);
  } catch (error) {
    io.stderr.write(`users-server repair: failed, nothing was removed: ${(error as Error).message}\n`);
    return 1;
  } finally {
    release();
  }
}

async function repairLocked(dir: string, io: RepairIo): Promise<number> {
  const say = (line: string) => io.stdout.write(line + '\n');
  const recovered = recover(dir, { salvage: true });
  const damage = recovered.damage;
  if (damage === undefined) {
    say(`${dir}: no damage found (${recovered.state.users.size} users); nothing to repair`);
    return 0;
  }
  const files = listDataFiles(dir);
  const damagedPath = join(dir, damage.file);
  say(`${damage.file}: damaged at byte offset ${damage.offset}: ${damage.reason}`);
  let dropped = damage.bytes;
  try {
    const copy = `${damage.file}.damaged-${new Date().toISOString().replaceAll(':', '')}`;
    copyFileSync(damagedPath, join(dir, copy));
    say(`kept a copy of the damaged file as ${copy}`);
  } catch (error) {
    // A missing file has nothing to copy.
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  // Journals after the damaged file are not applied: they continue a state
  // that is gone. Their bytes are counted as dropped (the copy keeps the damaged file only).
  const match = /^journal-(\d{8})$/.exec(damage.file);
  if (match) {
    for (const g of files.journals) {
      if (g > Number(match[1])) {
        dropped += statSync(join(dir, journalName(g))).size;
        const copy = `${journalName(g)}.damaged-${new Date().toISOString().replaceAll(':', '')}`;
        copyFileSync(join(dir, journalName(g)), join(dir, copy));
        say(`kept ${journalName(g)}, which follows the damage, as ${copy}`);
      }
    }
  }
  const state = recovered.state;
  state.sweep(Date.now());
  const generation = Math.max(0, ...files.journals, ...files.snapshots) + 1;
  const image = captureImage(state, Date.now());
  await writeSnapshot(image, generation, join(dir, `${snapshotName(generation)}.tmp`), join(dir, snapshotName(generation)));
  closeSync(createJournalSync(dir, generation));
  for (const g of files.journals) unlinkSync(join(dir, journalName(g)));
  for (const g of files.snapshots) unlinkSync(join(dir, snapshotName(g)));
  for (const temp of files.temps) unlinkSync(join(dir, temp));
  fsyncDirSync(dir);
  say(`dropped ${dropped} bytes from offset ${damage.offset} of ${damage.file} on`);
  say(`recovered ${state.users.size} users (ids issued up to ${state.lastId}) into ${snapshotName(generation)}; the server can start again`);
  return 0;
}
