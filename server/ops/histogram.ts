/**
 * A fixed-bucket histogram of durations in seconds, as Prometheus counts
 * them: each observation lands in the first bucket whose upper bound it does
 * not exceed; the exposition sums them into cumulative `le` buckets. Only
 * numbers change per observation, so it is safe on the hot path.
 */
export class Histogram {
  /** Per-bucket counts; the last slot is the +Inf bucket. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    /** Upper bounds in seconds, ascending. */
    readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(seconds: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && seconds > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += seconds;
    this.count++;
  }
}

/** Buckets for request latency: 0.25 ms (a map lookup) to 10 s (the request timeout's range). */
export const REQUEST_BUCKETS: readonly number[] = [
  0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

/** Buckets for one journal fdatasync: 50 µs (a write cache) to 5 s (a struggling disk). */
export const FSYNC_BUCKETS: readonly number[] = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5,
];
