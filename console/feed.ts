/**
 * The feed of changes (`GET /changes` as Server-Sent Events) for the whole
 * console: one EventSource, whose changes go to the views that listen. A
 * dropped connection is taken up again by the browser with Last-Event-ID,
 * so no change is missed or repeated; a feed the server ended (401, a
 * cursor too old) is started again here from the last cursor received.
 */
import { apiUrl } from './api.js';

interface Change {
  readonly cursor: string;
  readonly op: 'put' | 'delete' | 'move';
  readonly id: number;
  /** A move's old id. */
  readonly from?: number;
  readonly user?: Record<string, unknown>;
}

/**
 * A change, or `reset`: changes may have been missed (the feed started again from now), so what is shown is reloaded.
 */
export type FeedEvent = Change | 'reset';

const OPS = ['put', 'delete', 'move'] as const;
/** How long after the server ended the feed it is started again. */
const RESTART_MS = 1000;

export class Feed {
  private source: EventSource | undefined;
  private readonly listeners = new Set<(event: FeedEvent) => void>();
  private cursor: string | undefined;
  private restart: number | undefined;
  /** The times in a row the server ended the feed before it opened. */
  private refusals = 0;
  private openedNow: (() => void) | undefined;
  /** Resolves once the feed has connected (or given up for now): a view loaded after it misses no change. */
  opened: Promise<void>;

  /**
   * `stillSignedIn` is asked when the server ends the feed: false once the session is gone, and it is not started
   * again.
   */
  constructor(
    private readonly stillSignedIn: () => Promise<boolean>,
    private readonly onState: (state: 'live' | 'connecting') => void,
  ) {
    this.opened = new Promise((resolve) => (this.openedNow = resolve));
  }

  start(): void {
    const query = this.cursor === undefined ? '' : `?since=${encodeURIComponent(this.cursor)}`;
    const source = new EventSource(apiUrl(`changes${query}`));
    this.source = source;
    this.onState('connecting');
    source.onopen = () => {
      this.refusals = 0;
      this.onState('live');
      this.openedNow?.();
    };
    source.onerror = () => {
      // CONNECTING: the browser reconnects by itself, with Last-Event-ID. CLOSED: the server refused.
      this.onState('connecting');
      this.openedNow?.();
      if (source.readyState === EventSource.CLOSED) void this.ended(source);
    };
    for (const op of OPS) source.addEventListener(op, (event) => this.received(event as MessageEvent<string>));
  }

  private received(event: MessageEvent<string>): void {
    const change = JSON.parse(event.data) as Change;
    this.cursor = change.cursor;
    for (const listener of this.listeners) listener(change);
  }

  private async ended(source: EventSource): Promise<void> {
    if (this.source !== source) return;
    if (!(await this.stillSignedIn())) return this.stop();
    // Refused again from the same cursor: it is too old (410); go on from now.
    if (++this.refusals > 1) this.cursor = undefined;
    clearTimeout(this.restart);
    this.restart = window.setTimeout(() => {
      if (this.source !== source) return;
      this.start();
      // From now, not from a cursor: what changed meanwhile is not known.
      if (this.cursor === undefined) for (const listener of this.listeners) listener('reset');
    }, RESTART_MS);
  }

  /** Calls `listener` with every change from now on; returns what stops it. */
  listen(listener: (event: FeedEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  stop(): void {
    clearTimeout(this.restart);
    this.source?.close();
    this.source = undefined;
    this.listeners.clear();
  }
}
