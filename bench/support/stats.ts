/** Percentiles and rounding for the tables. */

export const sorted = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)

/** The value below which a share `p` (0..1) of the values lie (nearest rank). */
export const percentile = (ascending: ReadonlyArray<number>, p: number) =>
  ascending.length === 0 ? NaN : ascending[Math.min(ascending.length - 1, Math.ceil(ascending.length * p) - 1)]!

export const median = (values: ReadonlyArray<number>) => percentile(sorted(values), 0.5)

export const round = (value: number, digits = 0) => {
  const f = 10 ** digits
  return Math.round(value * f) / f
}

/** `min–max` of a set of figures, e.g. the spread of a percentile over repeated runs. */
export const spread = (values: ReadonlyArray<number>, digits = 2) =>
  values.length === 0 ? "-" : `${round(Math.min(...values), digits)}–${round(Math.max(...values), digits)}`
