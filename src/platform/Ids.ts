import { randomFillSync } from "node:crypto"
import { v7 } from "uuid"

/**
 * Time-ordered UUIDs (v7, RFC 9562): index-friendly and creation-ordered,
 * which keeps inserts local in B-trees.
 *
 * `uuid` lays the id out; what we add is where its random bytes come from
 * and its within-millisecond counter. The bytes are drawn from the system's
 * CSPRNG 4 KiB at a time (one `getRandomValues` call per id, as `v7()` makes,
 * cost about 20 µs per request on the write path, several ids each). Given
 * its own bytes `v7` keeps no state, so the counter `v7()` keeps is kept
 * here the same way: seeded from the random bytes in each new millisecond,
 * incremented within one, so ids of one process are strictly increasing.
 */
const ID_BYTES = 16
const POOL_BYTES = 256 * ID_BYTES
const pool = new Uint8Array(POOL_BYTES)
let at = POOL_BYTES

let lastMillis = -Infinity
let seq = 0

export const newId = (): string => {
  if (at === POOL_BYTES) {
    randomFillSync(pool)
    at = 0
  }
  const random = pool.subarray(at, at + ID_BYTES)
  at += ID_BYTES
  // The one synchronous time source of the service: ids are made by
  // synchronous code, much of it outside any Effect (row builders, the
  // tracer), on every write path. The instant only orders ids; nothing
  // compares it with the database's `now()` or a `Clock`.
  const now = Date.now()
  if (now > lastMillis) {
    // The 31-bit counter's seed, as `uuid` takes it.
    seq = ((random[6]! & 0x7f) << 24) | (random[7]! << 16) | (random[8]! << 8) | random[9]!
    lastMillis = now
  } else {
    seq = (seq + 1) | 0
    // The counter wrapped within one millisecond: borrow the next one.
    if (seq === 0) lastMillis++
  }
  return v7({ random, msecs: lastMillis, seq })
}
