/**
 * A SHA-256 digest in hex, apart from `Crypto.ts` (which loads Effect and
 * the configuration) for the correction workers' scrubber: a worker's
 * modules load no Effect.
 */
import * as crypto from "node:crypto"

export const sha256Hex = (value: string) => crypto.hash("sha256", value, "hex")
