import { systemFileProblem } from '../../shared/file-errors.js';
import { ServerCommandError } from '../errors.js';
import { DEFAULT_COMPACTION_FLOOR, openJournalStore, type JournalIo } from './journal/journal.js';
import { memoryStore } from './memory/state-store.js';
import type { Store } from './store.js';

export interface StoreOptions {
  /** Journal bytes below which no compaction starts. */
  compactionFloor?: number;
  /** Start-up notes and compaction reports. */
  log: (message: string) => void;
  /** Called once when the journal cannot write or sync: the server must stop. */
  onFatal: (error: Error) => void;
  now?: () => number;
  /** Tests replace the journal's write-path file system calls to inject failures. */
  io?: JournalIo;
  /**
   * Why the data directory must already hold a journal (a file an earlier
   * start left, say "its secret"): a missing or empty journal is then refused.
   */
  usedBefore?: string;
  /** How long a change stays in the feed of changes, in ms (DEFAULT_CHANGES_RETENTION_MS). */
  changesRetentionMs?: number;
  /** Users a filter with no sort and no count examines per request (scan-users.ts, FIND_BUDGET); tests set it small. */
  findBudget?: number;
  /** The PostgreSQL pool, statement timeout and start-up wait (tests: how often the pool is replaced). */
  postgres?: {
    max?: number;
    timeoutSeconds?: number;
    startWaitSeconds?: number;
    recycleAfter?: number;
    signal?: AbortSignal;
  };
}

/**
 * Opens the store `--store` names: `journal` in the data directory `dir`
 * (recovering it; throws a DataError when it cannot do so safely),
 * `memory`, or PostgreSQL (`postgres` for the PG* variables, or a
 * connection string): its module and driver are loaded only then.
 */
export async function openStore(spec: string, dir: string, options: StoreOptions): Promise<Store> {
  if (spec === 'memory')
    return memoryStore({
      ...(options.changesRetentionMs !== undefined && { changesRetentionMs: options.changesRetentionMs }),
      ...(options.now !== undefined && { now: options.now }),
      ...(options.findBudget !== undefined && { findBudget: options.findBudget }),
    });
  if (spec !== 'journal') {
    const { openPostgresStore } = await import('./postgres/open-postgres.js');
    return openPostgresStore(spec === 'postgres' ? undefined : spec, {
      log: options.log,
      ...options.postgres,
      ...(options.changesRetentionMs !== undefined && { changesRetentionMs: options.changesRetentionMs }),
      ...(options.findBudget !== undefined && { findBudget: options.findBudget }),
    });
  }
  try {
    return openJournalStore(dir, { compactionFloor: DEFAULT_COMPACTION_FLOOR, ...options });
  } catch (error) {
    const problem = systemFileProblem(error, dir);
    if (problem !== undefined) throw new ServerCommandError(`cannot open the store in ${dir}: ${problem}`);
    throw error;
  }
}
