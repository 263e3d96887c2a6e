import { isUnavailable } from './driver.js';

/** statement_timeout (`--db-timeout`) and lock_timeout: answered 503 like an outage, but the database does answer. */
const SLOW_STATES = new Set(['57014', '55P03']);

/** While the database is out of reach, how often it is asked whether it answers again. */
const OUTAGE_PROBE_MS = 1000;

/**
 * Says in the server's log when the database stops answering and when it
 * answers again: one line each way, however many requests meet the
 * outage (each of them is answered 503 `store-unavailable`). While it is
 * out, `answers` is asked once a second, so the line of its return comes
 * even when no request arrives. The journal says the same of a full disk.
 */
export class OutageLog {
  /** ms since the epoch when the outage began; undefined while the database answers. */
  private since: number | undefined;
  private probe: NodeJS.Timeout | undefined;
  private probing = false;

  constructor(
    /** What the outage is of, in the lines: the database's redacted URL. */
    private readonly what: string,
    /** Resolves true once the database answers a statement. */
    private readonly answers: () => Promise<boolean>,
    private readonly log: (line: string) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Notes a failure met by a request: the first of an outage is logged and
   * the probe started. A statement or lock timeout is a database that
   * answers slowly, not an outage; any other error is no outage either.
   */
  failed(error: unknown): void {
    if (this.since !== undefined || !isUnavailable(error) || SLOW_STATES.has((error as { code: string }).code)) return;
    this.since = this.now();
    const code = (error as { code: string }).code;
    this.log(
      `users-server: ${this.what} does not answer (${code}): requests that need it are answered 503 until it does`,
    );
    this.probe = setInterval(() => void this.askAgain(), OUTAGE_PROBE_MS).unref();
  }

  /** Stops asking (the store closes). */
  close(): void {
    clearInterval(this.probe);
    this.probe = undefined;
  }

  private async askAgain(): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    const back = await this.answers();
    this.probing = false;
    if (!back || this.since === undefined) return;
    const seconds = (this.now() - this.since) / 1000;
    this.close();
    this.since = undefined;
    this.log(`users-server: ${this.what} answers again, after ${seconds.toFixed(1)} s out of reach`);
  }
}
