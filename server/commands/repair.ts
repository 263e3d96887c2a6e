import { closeSync, linkSync, mkdirSync, rmSync, unlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { envName } from '../ops/config.js';
import { fileProblem } from '../../shared/file-errors.js';
import { SERVER_EXIT, ServerCommandError } from '../errors.js';
import { acquireLock, requireDataDir } from '../ops/data-dir.js';
import { fsyncDirSync } from '../ops/durable-files.js';
import { createJournalSync } from '../store/journal/journal.js';
import { journalName, listDataFiles, salvage, snapshotName, type Damage } from '../store/journal/recovery.js';
import { captureImage, writeSnapshot } from '../store/journal/snapshot.js';
import { commandFlags } from './command-io.js';

interface RepairIo {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
  env: NodeJS.ProcessEnv;
}

const USAGE = `usage: users-server repair [--data DIR]

Recovers a data directory whose journal or snapshot is damaged, with the
server stopped. It reads every record that still verifies (skipping damage
and resuming at the next good record), moves the original files into
DIR/repair-TIMESTAMP/, writes what it read back as a new snapshot and
journal, and lists every stretch it dropped. --data defaults to
$${envName('data')}, else ./data.

Exit codes: 0 no damage found (nothing changed); 1 cannot repair (nothing
changed: a directory missing, locked or written by a newer users-server);
2 bad flag; 3 repaired, and something was dropped (listed on stdout).`;

/** Exit code: repaired, but some bytes could not be read back. */
const DROPPED = 3;
/**
 * The fewest bytes a journal line that issues an id can take ("r\t1\t0"): dropped bytes issued at most this many ids.
 */
const MIN_ISSUING_LINE = 6;

/**
 * `users-server repair`: see USAGE for the exit codes; 1 and 2 are a ServerCommandError and a ServerUsageError thrown.
 */
export async function repair(argv: readonly string[], io: RepairIo): Promise<number> {
  const values = commandFlags(
    'repair',
    argv,
    { data: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    USAGE,
    io,
  );
  if (values === undefined) return SERVER_EXIT.ok;
  const dir = resolve(values.data ?? io.env[envName('data')] ?? './data');
  requireDataDir(dir);
  const release = acquireLock(dir, (line) => io.stderr.write(line + '\n'));
  try {
    return await repairLocked(dir, io);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const problem =
      typeof code === 'string'
        ? fileProblem('write', (error as NodeJS.ErrnoException).path ?? dir, error)
        : (error as Error).message;
    throw new ServerCommandError(`failed, nothing was removed: ${problem}`);
  } finally {
    release();
  }
}

async function repairLocked(dir: string, io: RepairIo): Promise<number> {
  const say = (line: string) => io.stdout.write(line + '\n');
  const { state, dropped } = salvage(dir);
  if (dropped.length === 0) {
    say(`${dir}: no damage found (${state.users.size} users); nothing to repair`);
    return SERVER_EXIT.ok;
  }
  for (const damage of dropped) say(describe(damage));
  const bytes = dropped.reduce((sum, d) => sum + d.bytes, 0);
  // Ids issued only in dropped bytes must never be issued again.
  const skipped = Math.ceil(bytes / MIN_ISSUING_LINE) + dropped.length;
  const mark = Math.min(Number.MAX_SAFE_INTEGER - 1, state.lastId + skipped);
  state.restoreIssued(
    mark,
    [...state.claimedIds()].filter((id) => id > mark),
  );
  state.sweep(Date.now());
  const aside = keepOriginals(dir);
  const files = listDataFiles(dir);
  const generation = Math.max(0, ...files.journals, ...files.snapshots) + 1;
  try {
    await writeSnapshot(
      captureImage(state, Date.now()),
      generation,
      join(dir, `${snapshotName(generation)}.tmp`),
      join(dir, snapshotName(generation)),
    );
    closeSync(createJournalSync(dir, generation));
    fsyncDirSync(dir);
  } catch (error) {
    // The originals are all still in place: what was written goes, and so does the copy kept of them.
    for (const name of [snapshotName(generation), journalName(generation)]) rmSync(join(dir, name), { force: true });
    rmSync(aside, { recursive: true, force: true });
    throw error;
  }
  say(`kept the original files in ${aside}`);
  for (const name of dataFileNames(files)) unlinkSync(join(dir, name));
  fsyncDirSync(dir);
  say(
    `recovered ${state.users.size} users into ${snapshotName(generation)}; dropped ${bytes} bytes in ${dropped.length} place${dropped.length === 1 ? '' : 's'}`,
  );
  say(
    `the next id issued is above ${state.lastId} (${skipped} ids skipped, which the dropped bytes could have issued)`,
  );
  say(
    'the server can start again; users written only in the dropped bytes are lost: compare with a backup or an export',
  );
  return DROPPED;
}

function describe(damage: Damage): string {
  const where = damage.bytes > 0 ? `dropped ${damage.bytes} bytes at offset ${damage.offset}` : 'dropped';
  return `${damage.file}: ${where}: ${damage.reason}`;
}

function dataFileNames(files: ReturnType<typeof listDataFiles>): string[] {
  return [...files.journals.map(journalName), ...files.snapshots.map(snapshotName), ...files.temps];
}

/**
 * Hard-links every journal and snapshot into DIR/repair-TIMESTAMP/ (the
 * same files, no copy, no space) and syncs it, before anything in DIR
 * changes: a crash at any later point leaves the originals there, whole.
 */
function keepOriginals(dir: string): string {
  const aside = join(dir, `repair-${new Date().toISOString().replace(/[-:]|\.\d+/g, '')}`);
  mkdirSync(aside, { mode: 0o700 });
  for (const name of dataFileNames(listDataFiles(dir))) {
    linkSync(join(dir, name), join(aside, name));
  }
  fsyncDirSync(aside);
  return aside;
}
