/**
 * The form of an API key, for scanners: apart from `Identity.ts` because
 * the correction workers' scrubber needs it and a worker's modules load no
 * Effect.
 */

/** Every key starts with this, so secret scanners (ours included) recognize it. */
export const KEY_PREFIX = "svc_"
/** The pattern of a key, for scanners. */
export const KEY_PATTERN = /svc_[A-Za-z0-9_-]{43}/g
