/**
 * A person who may decide an approval, as groups, delegations and reviewer
 * addresses name them: an API key (by id) or a console person (by name),
 * and the decider name records store for them (`decided_by`).
 */
import { Schema } from "effect"
import { Text, Uuid } from "./Common.ts"

/**
 * A console person's name, as `console login --name` gives it: no control
 * character (U+0000-U+001F, U+007F-U+009F), the first not a space either
 * (`\s` written out, see `SPACE_CHARACTERS`).
 */
const PersonName = Text.check(
  Schema.isPattern(
    /^[^\x00-\x20\x7f-\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff][^\x00-\x1f\x7f-\x9f]{0,127}$/u,
    {
      message: "Expected 1 to 128 characters, no control characters, not starting with a space"
    }
  )
)

/** The two ways to name a person: exactly one of them stands in a reviewer. */
export const ReviewerFields = {
  key_id: Schema.optionalKey(
    Uuid.annotate({ description: "An API key of the organization holding `approvals.decide`" })
  ),
  console_user: Schema.optionalKey(
    PersonName.annotate({ description: "A console person, as `decided_by` names them after `console:`" })
  )
}

/**
 * A person who may decide: an API key (by id) or a console person (by
 * name), exactly one of the two members. One object with both optional and
 * one property, rather than a union of two, so that a refused `key_id` is
 * named as `key_id` (a union's refusal names its last variant's member).
 */
export const Reviewer = Schema.Struct(ReviewerFields).check(Schema.isMinProperties(1), Schema.isMaxProperties(1))
  .annotate({
    description: "An API key (`key_id`) or a console person (`console_user`): exactly one of them"
  })
export type Reviewer = typeof Reviewer.Type

/** The decider a record names for a reviewer: the key's id, or `console:<person>`. */
export const deciderOf = (reviewer: Reviewer): string =>
  reviewer.key_id !== undefined ? reviewer.key_id : `console:${reviewer.console_user ?? ""}`

/** The reviewer a stored decider names. */
export const reviewerOf = (decider: string): Reviewer =>
  decider.startsWith("console:") ? { console_user: decider.slice("console:".length) } : { key_id: decider }

/** Exactly one of `key_id` and `console_user` (beside which `email` may stand); documented as the `oneOf` of the two. */
export const isOneReviewer = Schema.makeFilter(
  (member: { readonly key_id?: string; readonly console_user?: string }) =>
    (member.key_id === undefined) !== (member.console_user === undefined) ||
    "Expected exactly one of key_id and console_user",
  { toJsonSchema: () => ({ oneOf: [{ required: ["key_id"] }, { required: ["console_user"] }] }) }
)
