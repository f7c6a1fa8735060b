/**
 * A decision's reason is free text a person types, and it travels far: to
 * every webhook receiver of `approval.approved`/`approval.rejected`, to the
 * session stream, to the console. A secret pasted into it ("the token
 * ghp_... is revoked already") would leak to all of them, so before it is
 * stored the feedback scrubber's rules remove what is recognizably a secret:
 * anything in the shape of a credential svc issues (API keys, signing
 * secrets, console tokens) and the recognizable formats of `SecretRules.ts`.
 * Only the secret part is replaced, by `[REDACTED]`; the rest stays as the
 * person wrote it. A rejection's `response` (an answer for the agent, which
 * travels as far) is scrubbed the same way, every string of it.
 *
 * A response is at most 65 536 characters; one packed with secret-shaped
 * text scans in 15-50 ms (the secretlint ruleset's duplicate filter is
 * quadratic in its findings), so it is scrubbed in a rule worker
 * (`RuleWorkers.scrub`, within `SVC_SCRUB_TIMEOUT`), not on the event loop.
 *
 * The reason is at most 1 000 characters (the API checks it), so it is
 * scanned here, in the request, not in the feedback worker pool that
 * corrections of any size need: after the ruleset's first load (tens of
 * milliseconds, once per process) a scan of 1 000 characters takes well
 * under a millisecond.
 */
import { Effect } from "effect"
import { type Json, scrub } from "../feedback/Scrubber.ts"
import { NOTHING_KNOWN, responseScrubbed } from "./ResponseScrub.ts"

/** `reason` with every recognizable secret replaced by `[REDACTED]`. */
export const scrubReason = (reason: string): Effect.Effect<string> =>
  reason === ""
    ? Effect.succeed(reason)
    : Effect.promise(() => scrub(reason, NOTHING_KNOWN)).pipe(
      Effect.map((result) => typeof result.value === "string" ? result.value : reason)
    )

/** A decision's `response` scrubbed here, on the event loop (a decision's is scrubbed in a rule worker). */
export const scrubResponse = (response: Json): Effect.Effect<Json> => Effect.promise(() => responseScrubbed(response))
