/**
 * Operations of one kind gathered while the previous statement of that kind
 * is at the database (one at a time per kind and instance), and sent
 * together as the next statement (`send`), each caller getting its own
 * result. Under load an instance receives many GETs and PUTs while a
 * statement is under way, and one statement for all of them saves the round
 * trips, the driver's and the database's cost per statement and, for
 * writes, the commits (docs/performance.md, "Statements gathered"). When
 * nothing is under way an operation is sent on the next turn of the event
 * loop, so a lone request waits for that turn only.
 *
 * An operation is sent after the request that asked for it arrived, never
 * before, so a read sees every write acknowledged before it, as it would
 * one at a time. With `keyOf`, two operations on one key never share a
 * statement: the later waits for the next (two writes of one row in one
 * `UPDATE ... FROM` would apply only one of them).
 */
export class GatheredStatements<Item, Result> {
  private waiting: Pending<Item, Result>[] = [];
  private scheduled = false;
  private underWay = false;

  constructor(
    /** The results of `items`, in their order. */
    private readonly send: (items: Item[]) => Promise<Result[]>,
    private readonly keyOf?: (item: Item) => number,
  ) {}

  run(item: Item): Promise<Result> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.underWay || this.waiting.length === 0) return;
    this.scheduled = true;
    setImmediate(this.flush);
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    const batch = this.take();
    this.underWay = true;
    this.send(batch.map((p) => p.item)).then(
      (results) => {
        this.settled();
        batch.forEach((p, i) => p.resolve(results[i]!));
      },
      (error: unknown) => {
        this.settled();
        for (const p of batch) p.reject(error);
      },
    );
  };

  /** The waiting operations that may share a statement; the rest wait on. */
  private take(): Pending<Item, Result>[] {
    const all = this.waiting;
    if (this.keyOf === undefined) {
      this.waiting = [];
      return all;
    }
    const keys = new Set<number>();
    const batch: Pending<Item, Result>[] = [];
    const later: Pending<Item, Result>[] = [];
    for (const p of all) {
      const key = this.keyOf(p.item);
      if (keys.has(key)) later.push(p);
      else {
        keys.add(key);
        batch.push(p);
      }
    }
    this.waiting = later;
    return batch;
  }

  private settled(): void {
    this.underWay = false;
    this.schedule();
  }
}

interface Pending<Item, Result> {
  item: Item;
  resolve: (result: Result) => void;
  reject: (error: unknown) => void;
}
