/**
 * Rate limiting per client: one token bucket per key, refilled lazily from a
 * monotonic clock when the key is next seen, so idle clients cost no timers.
 *
 * The response fields follow draft-ietf-httpapi-ratelimit-headers-11
 * (May 2026), sections 3 and 4: `RateLimit-Policy` and `RateLimit` are
 * structured-field Lists of one Item named "default", e.g.
 * `RateLimit-Policy: "default";q=10;w=1` and `RateLimit: "default";r=7;t=1`.
 */
import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';

interface RateLimiterOptions {
  /** Tokens added per second: the sustained requests per second. At least 1. */
  rate: number;
  /** Bucket size: the requests a client may make at once. At least 1. */
  burst: number;
  /** Most keys tracked at once; memory stays bounded however many clients come. */
  maxBuckets?: number;
  /** Milliseconds from a monotonic clock (performance.now by default); tests inject their own. */
  now?: () => number;
}

interface RateDecision {
  /** True when the request may proceed: it took a token. */
  readonly admitted: boolean;
  /** Whole requests left in the bucket after this one (0 when refused). */
  readonly remaining: number;
  /**
   * Admitted: whole seconds until the bucket is full again (the `t` of
   * RateLimit). Refused: whole seconds, at least 1, until one request will
   * be admitted (Retry-After).
   */
  readonly seconds: number;
}

interface Bucket {
  tokens: number;
  /** Clock reading when `tokens` was last brought up to date. */
  at: number;
}

const DEFAULT_MAX_BUCKETS = 100_000;
/** A prune frees at least this share of the cap, so prunes stay rare under any load. */
const PRUNE_TO = 0.9;
const POLICY_NAME = '"default"';

/** Token buckets per key, with a bounded number of keys. */
export class RateLimiter {
  readonly rate: number;
  readonly burst: number;
  readonly maxBuckets: number;
  /** The RateLimit-Policy field value; the same on every response. */
  readonly policy: string;
  private readonly now: () => number;
  private readonly buckets = new Map<string, Bucket>();

  constructor(options: RateLimiterOptions) {
    if (!(options.rate >= 1) || !(options.burst >= 1)) throw new RangeError('rate and burst must be at least 1');
    this.rate = options.rate;
    this.burst = options.burst;
    this.maxBuckets = options.maxBuckets ?? DEFAULT_MAX_BUCKETS;
    this.now = options.now ?? (() => performance.now());
    // q requests per w seconds. The window is the time a drained bucket
    // takes to refill, rounded up because the draft has no sub-second
    // windows; so the policy never promises more than the bucket gives.
    this.policy = `${POLICY_NAME};q=${this.burst};w=${Math.max(1, Math.ceil(this.burst / this.rate))}`;
  }

  /** Keys currently tracked. */
  get size(): number {
    return this.buckets.size;
  }

  /** Takes one token from `key`'s bucket if it has one; a refused request takes nothing. */
  take(key: string): RateDecision {
    const now = this.now();
    let bucket = this.buckets.get(key);
    if (bucket === undefined) {
      if (this.buckets.size >= this.maxBuckets) this.prune(now);
      bucket = { tokens: this.burst, at: now };
      this.buckets.set(key, bucket);
    } else {
      this.refill(bucket, now);
    }
    if (bucket.tokens < 1) {
      return { admitted: false, remaining: 0, seconds: Math.max(1, Math.ceil((1 - bucket.tokens) / this.rate)) };
    }
    bucket.tokens -= 1;
    return {
      admitted: true,
      remaining: Math.floor(bucket.tokens),
      seconds: Math.ceil((this.burst - bucket.tokens) / this.rate),
    };
  }

  /** The RateLimit field value for a decision. */
  field(decision: RateDecision): string {
    return `${POLICY_NAME};r=${decision.remaining};t=${decision.seconds}`;
  }

  private refill(bucket: Bucket, now: number): void {
    // A clock that steps back (an injected one) refills nothing rather than draining.
    const elapsed = now - bucket.at;
    if (elapsed > 0) bucket.tokens = Math.min(this.burst, bucket.tokens + (elapsed * this.rate) / 1000);
    bucket.at = now;
  }

  /**
   * Makes room for new keys. A full bucket carries no information (a new
   * one would be the same), so those go first; if that frees too little,
   * the oldest keys go (Map order is insertion order). Each prune frees a
   * tenth of the cap or more, so its O(n) cost is spread over many requests.
   */
  private prune(now: number): void {
    const target = Math.floor(this.maxBuckets * PRUNE_TO);
    for (const [key, bucket] of this.buckets) {
      if (bucket.tokens + (Math.max(0, now - bucket.at) * this.rate) / 1000 >= this.burst) this.buckets.delete(key);
    }
    for (const key of this.buckets.keys()) {
      if (this.buckets.size <= target) break;
      this.buckets.delete(key);
    }
  }
}

/**
 * The key of a client address, for every limit kept per client (the rate
 * limit, the failed-login limit, the connection limits). An IPv4 address is
 * its own key, also when a dual-stack socket gives it IPv4-mapped
 * (`::ffff:192.0.2.1`): otherwise every IPv4 client of `--host ::` would
 * share the key of `::ffff:0:0/64`. An IPv6 address is keyed by its /64
 * prefix: one host or home network is routinely given a whole /64, so
 * per-address keys would hand one client 2^64 of them.
 */
export function limitKey(socketAddress: string): string {
  const address = unmapIpv4(socketAddress);
  if (!address.includes(':')) return address;
  const zone = address.indexOf('%');
  const bare = zone === -1 ? address : address.slice(0, zone);
  const gap = bare.indexOf('::');
  const groups = (part: string): string[] =>
    part === '' ? [] : part.split(':').flatMap((g) => (g.includes('.') ? ['0', '0'] : [g]));
  let all: string[];
  if (gap === -1) {
    all = groups(bare);
  } else {
    const head = groups(bare.slice(0, gap));
    const tail = groups(bare.slice(gap + 2));
    all = [...head, ...Array<string>(Math.max(0, 8 - head.length - tail.length)).fill('0'), ...tail];
  }
  return (
    all
      .slice(0, 4)
      .map((g) => parseInt(g, 16).toString(16))
      .join(':') + '::/64'
  );
}

/** An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, RFC 4291 section 2.5.5.2) as IPv4; any other address as it is. */
export function unmapIpv4(address: string): string {
  return address.length > 7 && address.slice(0, 7).toLowerCase() === '::ffff:' && isIP(address.slice(7)) === 4
    ? address.slice(7)
    : address;
}
