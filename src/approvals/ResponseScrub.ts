/**
 * A decision's `response` scrubbed of recognizable secrets (`Reasons.ts`
 * says which), apart from Effect: the rule workers load it
 * (`rule-worker.ts`, `RuleWorkers.scrub`).
 */
import { type Json, scrub } from "../feedback/Scrubber.ts"

/** No organization's credentials: only what is recognizably a secret is removed. */
export const NOTHING_KNOWN = { keyHashes: new Set<string>(), values: [] }

/** A decision's `response` with every recognizable secret replaced by `[REDACTED]`. */
export const responseScrubbed = (response: Json): Promise<Json> =>
  scrub(response, NOTHING_KNOWN).then((result) => result.value)
