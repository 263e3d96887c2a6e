/**
 * Strings paired with numbers, found by string: the holders of a unique
 * field's keys (key-holders.ts). A Map of a million strings waits on memory four
 * or five times a lookup (its bucket, then each entry of the chain and the
 * entry's key); this table keeps each pair and its key's hash side by side
 * in one array and probes linearly, so a lookup waits on its slot and on
 * the key it compares, twice.
 *
 * Open addressing over slots of three elements: the key's hash (30 bits,
 * a small integer), the key, its number. The slot of a hash is its place in
 * the table scaled to the capacity, so the capacity need not be a power
 * of two. A table is made for the keys it expects at 0.75 of its
 * capacity, and made again at 0.5 once they pass 0.8 or fall under 0.25:
 * past 0.8 a key the table lacks is looked for over runs of tens of slots.
 * A removal moves later pairs of its run back into the gap, so no slot is
 * ever marked removed. The hash starts from a random seed per table: it
 * is not a keyed hash, but keys found to share slots in one table do not
 * in the next.
 */

/** A slot's key when the slot holds no pair. */
const EMPTY = 0;
const SLOT = 3;
const MAX_LOAD = 0.8;
const MIN_LOAD = 0.25;
/** The load a table is made at for the keys it is told to expect. */
const LOAD = 0.75;
/** The load a table is made again at once its keys pass MAX_LOAD or fall under MIN_LOAD: room for as many again. */
const REMADE_LOAD = 0.5;
const MIN_CAPACITY = 16;

export class KeyTable {
  private slots: (number | string)[] = [];
  private capacity = 0;
  private count = 0;

  /** A table sized for `expected` keys; `hashOf` gives 30 bits of a key (a test chooses where keys land). */
  constructor(
    expected = 0,
    private readonly hashOf: (key: string) => number = seededHash((Math.random() * 0x100000000) >>> 0),
  ) {
    this.resize(expected, LOAD);
  }

  get size(): number {
    return this.count;
  }

  /** The number paired with `key`, if any. */
  get(key: string): number | undefined {
    const at = this.slotOf(key, this.hashOf(key));
    return this.slots[at * SLOT + 1] === EMPTY ? undefined : (this.slots[at * SLOT + 2] as number);
  }

  /** Pairs `key` with `value`, in place of what it was paired with: that number, if any. */
  set(key: string, value: number): number | undefined {
    const hash = this.hashOf(key);
    const at = this.slotOf(key, hash);
    const { slots } = this;
    const held = slots[at * SLOT + 1] === EMPTY ? undefined : (slots[at * SLOT + 2] as number);
    slots[at * SLOT + 2] = value;
    if (held !== undefined) return held;
    slots[at * SLOT] = hash;
    slots[at * SLOT + 1] = key;
    if (++this.count > this.capacity * MAX_LOAD) this.resize(this.count, REMADE_LOAD);
    return undefined;
  }

  delete(key: string): void {
    const at = this.slotOf(key, this.hashOf(key));
    if (this.slots[at * SLOT + 1] === EMPTY) return;
    this.closeGap(at);
    if (--this.count < this.capacity * MIN_LOAD && this.capacity > MIN_CAPACITY) this.resize(this.count, REMADE_LOAD);
  }

  /** The slot that holds `key`, else the empty slot that ends its run. */
  private slotOf(key: string, hash: number): number {
    const { slots } = this;
    let at = this.home(hash);
    for (;;) {
      const held = slots[at * SLOT + 1];
      if (held === EMPTY || (slots[at * SLOT] === hash && held === key)) return at;
      at = this.after(at);
    }
  }

  /** Empties slot `gap`, moving back each later pair of its run whose home is not between the gap and it. */
  private closeGap(gap: number): void {
    const { slots } = this;
    for (let at = this.after(gap); slots[at * SLOT + 1] !== EMPTY; at = this.after(at)) {
      const home = this.home(slots[at * SLOT] as number);
      const stays = gap <= at ? gap < home && home <= at : gap < home || home <= at;
      if (stays) continue;
      for (let i = 0; i < SLOT; i++) slots[gap * SLOT + i] = slots[at * SLOT + i]!;
      gap = at;
    }
    for (let i = 0; i < SLOT; i++) slots[gap * SLOT + i] = EMPTY;
  }

  /** A table of capacity for `pairs` at `load`, holding the pairs it held. */
  private resize(pairs: number, load: number): void {
    const old = this.slots;
    this.capacity = Math.max(MIN_CAPACITY, Math.ceil(pairs / load));
    // Made at its size and filled: an array grown by push keeps up to half again its room, and leaves smaller copies.
    this.slots = new Array<number | string>(this.capacity * SLOT).fill(EMPTY);
    for (let i = 0; i < old.length; i += SLOT) {
      if (old[i + 1] === EMPTY) continue;
      let at = this.home(old[i] as number);
      while (this.slots[at * SLOT + 1] !== EMPTY) at = this.after(at);
      for (let j = 0; j < SLOT; j++) this.slots[at * SLOT + j] = old[i + j]!;
    }
  }

  private home(hash: number): number {
    // The hash is below 2 ** 30: its share of that, scaled, is below the capacity.
    return Math.floor((hash / 0x40000000) * this.capacity);
  }

  private after(at: number): number {
    return at + 1 === this.capacity ? 0 : at + 1;
  }
}

/** FNV-1a over a key's UTF-16 units from `seed`, then mixed (MurmurHash3's finalizer); 30 bits, a small integer. */
function seededHash(seed: number): (key: string) => number {
  return (key) => {
    let hash = seed ^ key.length;
    for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
    hash = Math.imul(hash ^ (hash >>> 16), 0x85ebca6b);
    hash = Math.imul(hash ^ (hash >>> 13), 0xc2b2ae35);
    return (hash ^ (hash >>> 16)) & 0x3fffffff;
  };
}
