import { StoreState } from './state.js';
import type { Mutation, Store } from './types.js';

/** A store that keeps its state in memory only: fast, and gone on exit. */
export class MemoryStore implements Store {
  readonly state = new StoreState();

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
}
