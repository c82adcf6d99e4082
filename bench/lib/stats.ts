/**
 * The statistics every benchmark prints: medians, percentiles, the spread of a set of runs
 * (median, min-max and their ratio), ratios of medians, and byte and RSS figures in MiB. One
 * place, so that every table's "median (min-max, max/min)" means the same.
 */

export const MiB = 1024 * 1024;

/** The median of the numbers, NaNs left out; NaN when none is left. */
export function median(xs: readonly number[]): number {
  const s = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The `p` quantile (0 to 1) by nearest rank: the value at ⌊p·n⌋ of the sorted numbers, the largest at most. */
export function percentile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
}

/** Median and range of a set of runs. */
export interface Spread {
  med: number;
  min: number;
  max: number;
}

/** Median, min and max of the numbers given (undefined and NaN left out; med NaN when none). */
export function spread(xs: readonly (number | undefined)[]): Spread {
  const v = xs.filter((x): x is number => x !== undefined && !Number.isNaN(x));
  return { med: median(v), min: Math.min(...v), max: Math.max(...v) };
}

/** max/min of a spread: how far apart the slowest and the fastest run are. */
export const maxOverMin = (x: Spread): number => x.max / x.min;

/** `a / b`, as the ratio of two medians is printed. */
export const ratio = (a: number, b: number): number => a / b;

/** `med (min-max, ×max/min)`, or `—` when there are no runs. */
export function fmtSpread(x: Spread, digits = 3): string {
  return Number.isNaN(x.med)
    ? '—'
    : `${x.med.toFixed(digits)} (${x.min.toFixed(digits)}-${x.max.toFixed(digits)}, ×${maxOverMin(x).toFixed(2)})`;
}

/** `med (min-max)`. */
export const fmtRange = (x: Spread, digits: number): string =>
  `${x.med.toFixed(digits)} (${x.min.toFixed(digits)}-${x.max.toFixed(digits)})`;

/** A peak RSS as GNU time reports it (KiB), in MiB. */
export const fmtRssKiB = (kib: number, digits = 0): string => (kib / 1024).toFixed(digits);

/** MB/s (10^6 bytes per second) of `bytes` moved in `seconds`. */
export const mbPerS = (bytes: number, seconds: number): number => bytes / 1e6 / seconds;
