/**
 * What the organization's approvals list (and its stream, an approval's
 * context and the history) tells a person beyond the snapshot: the
 * escalation chain the approval was requested with, and the names of the
 * API keys that decided it, so a person reads who acted and what comes next.
 */
import { Schema } from "effect"

export const RequestedChain = Schema.optionalKey(
  Schema.Array(Schema.String).annotate({
    description:
      "The reviewer groups its deadlines hand it to, in order (the chain of the policy or rule that required it, as it was then); the groups still to come are those after the first `escalation_level`. Absent without a chain"
  })
)

export const KeyNames = Schema.optionalKey(
  Schema.Record(Schema.String, Schema.String).annotate({
    description:
      "The names of the API keys it names as deciders (`decided_by`, `decided_by_person`, `decided_for`, and those of `votes`), by key id, so a person reads who acted; keys without a name are left out. Absent when there are none"
  })
)
