/**
 * Reads of users by id gathered over one turn of the event loop and sent
 * as one statement (`read`), each waiting reader getting its own row.
 * Under load an instance handles many GETs per turn, and one statement
 * for all of them saves the driver's and the database's cost per
 * statement (docs/performance.md, "GETs by id in one statement"). A read
 * is sent after the request that asked for it arrived, never before, so a
 * write acknowledged before then is seen as it would be one at a time.
 */
export class IdLookups<Row> {
  private waiting = new Map<number, Waiter<Row>[]>();
  private scheduled = false;

  constructor(
    /** The rows of `ids`, by id; an id without a row is absent. */
    private readonly read: (ids: number[]) => Promise<Map<number, Row>>,
  ) {}

  find(id: number): Promise<Row | undefined> {
    return new Promise((resolve, reject) => {
      const waiters = this.waiting.get(id);
      if (waiters === undefined) this.waiting.set(id, [{ resolve, reject }]);
      else waiters.push({ resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.flush);
      }
    });
  }

  private readonly flush = (): void => {
    const batch = this.waiting;
    this.waiting = new Map();
    this.scheduled = false;
    this.read([...batch.keys()]).then(
      (rows) => {
        for (const [id, waiters] of batch) for (const waiter of waiters) waiter.resolve(rows.get(id));
      },
      (error: unknown) => {
        for (const waiters of batch.values()) for (const waiter of waiters) waiter.reject(error);
      },
    );
  };
}

interface Waiter<Row> {
  resolve: (row: Row | undefined) => void;
  reject: (error: unknown) => void;
}
