import { randomFillSync } from "node:crypto"
import { uuidText } from "./UuidText.ts"

/**
 * Time-ordered UUIDs (v7, RFC 9562): index-friendly and creation-ordered,
 * which keeps inserts local in B-trees.
 *
 * The layout is `uuid`'s `v7` (48-bit milliseconds, version 7, a 31-bit
 * counter over the version and variant bits, 32 random bits), written here
 * into one reused 16-byte buffer and turned into text by `uuidText`
 * (`UuidText.ts`: no per-id buffers or string pieces). The random bytes are
 * drawn from the system's CSPRNG 4 KiB at a time (one `getRandomValues`
 * call per id, as `v7()` makes, cost about 20 µs per request on the write
 * path, several ids each). The counter is seeded from the random bytes in
 * each new millisecond and incremented within one, so ids of one process
 * are strictly increasing.
 */
const ID_BYTES = 16
const POOL_BYTES = 256 * ID_BYTES
const pool = new Uint8Array(POOL_BYTES)
let at = POOL_BYTES

const bytes = new Uint8Array(ID_BYTES)
let lastMillis = -Infinity
let seq = 0

export const newId = (): string => {
  if (at === POOL_BYTES) {
    randomFillSync(pool)
    at = 0
  }
  const r = at
  at += ID_BYTES
  // The one synchronous time source of the service: ids are made by
  // synchronous code, much of it outside any Effect (row builders, the
  // tracer), on every write path. The instant only orders ids; nothing
  // compares it with the database's `now()` or a `Clock`.
  const now = Date.now()
  if (now > lastMillis) {
    // The 31-bit counter's seed, as `uuid` takes it.
    seq = ((pool[r + 6]! & 0x7f) << 24) | (pool[r + 7]! << 16) | (pool[r + 8]! << 8) | pool[r + 9]!
    lastMillis = now
  } else {
    seq = (seq + 1) | 0
    // The counter wrapped within one millisecond: borrow the next one.
    if (seq === 0) lastMillis++
  }
  const msecs = lastMillis
  bytes[0] = (msecs / 0x10000000000) & 0xff
  bytes[1] = (msecs / 0x100000000) & 0xff
  bytes[2] = (msecs / 0x1000000) & 0xff
  bytes[3] = (msecs / 0x10000) & 0xff
  bytes[4] = (msecs / 0x100) & 0xff
  bytes[5] = msecs & 0xff
  bytes[6] = 0x70 | ((seq >>> 28) & 0x0f)
  bytes[7] = (seq >>> 20) & 0xff
  bytes[8] = 0x80 | ((seq >>> 14) & 0x3f)
  bytes[9] = (seq >>> 6) & 0xff
  bytes[10] = ((seq << 2) & 0xff) | (pool[r + 10]! & 0x03)
  bytes[11] = pool[r + 11]!
  bytes[12] = pool[r + 12]!
  bytes[13] = pool[r + 13]!
  bytes[14] = pool[r + 14]!
  bytes[15] = pool[r + 15]!
  return uuidText(bytes)
}
