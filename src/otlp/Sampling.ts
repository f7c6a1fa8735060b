/** Trace-id-ratio sampling, consistent with OpenTelemetry's probability sampling. */

const TWO_TO_56 = 2 ** 56
const TWO_TO_28 = 2 ** 28

/**
 * Trace-id-ratio decision on the low 56 bits of the trace id (the W3C
 * random part), as OpenTelemetry's consistent probability sampling defines
 * it: keep when the randomness R >= the rejection threshold
 * T = (1 - ratio) * 2^56. The same rule in a collector's probabilistic
 * sampler then keeps every trace we kept at a lower ratio (keeping
 * R < ratio * 2^56 instead would be the complementary set: a collector
 * sampling at 50% would drop every trace we sampled at 10%).
 */
export const sampledByRatio = (traceId: string, ratio: number): boolean => {
  if (ratio >= 1) return true
  if (ratio <= 0) return false
  // Compared exactly in two 28-bit halves (a 56-bit integer does not fit a double).
  const threshold = Math.round((1 - ratio) * TWO_TO_56)
  const thresholdHigh = Math.floor(threshold / TWO_TO_28)
  const thresholdLow = threshold - thresholdHigh * TWO_TO_28
  const high = Number.parseInt(traceId.slice(-14, -7), 16)
  const low = Number.parseInt(traceId.slice(-7), 16)
  return high > thresholdHigh || (high === thresholdHigh && low >= thresholdLow)
}
