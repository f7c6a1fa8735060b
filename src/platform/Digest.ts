/**
 * A SHA-256 digest in hex. Not in `Crypto.ts`, which loads Effect and the
 * configuration: the correction workers' scrubber uses it too, and a
 * worker's modules load no Effect.
 */
import * as crypto from "node:crypto"

export const sha256Hex = (value: string) => crypto.hash("sha256", value, "hex")
