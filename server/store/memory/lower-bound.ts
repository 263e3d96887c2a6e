/** The index of the first element of `sorted` (ascending) that is not below `value`: its length when none is. */
export function lowerBound<T extends number | string>(sorted: readonly T[], value: T): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (sorted[middle]! < value) low = middle + 1;
    else high = middle;
  }
  return low;
}
