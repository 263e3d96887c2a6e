import { FSYNC_BUCKETS, Histogram } from '../../ops/histogram.js';
import { StoreState } from './state.js';
import type { Mutation, Store, StoreStats } from '../store.js';

/** A store that keeps its state in memory only: fast, and gone on exit. */
export class MemoryStore implements Store {
  readonly state = new StoreState();
  private readonly figures: StoreStats = { journalBytes: 0, fsyncSeconds: new Histogram(FSYNC_BUCKETS) };

  commit(mutations: readonly Mutation[]): Promise<void> {
    for (const m of mutations) this.state.apply(m);
    return Promise.resolve();
  }

  durable(): undefined {
    return undefined;
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  /** No journal, no syncs: zeros, so dashboards keep their series. */
  stats(): StoreStats {
    return this.figures;
  }
}
