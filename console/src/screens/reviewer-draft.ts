/**
 * What the Reviewers screen sends and how it reads the answers: members as
 * the form holds them, the group payloads of each edit, the contract's own
 * schemas checked before anything is sent, and every problem (those, or the
 * API's) as a list of fields and what is wrong there.
 */
import { Result, Schema, SchemaIssue } from "effect"
import { GroupName } from "../../../src/api/Assignment.ts"
import type { Reviewer } from "../../../src/api/Deciders.ts"
import { DelegationInput } from "../../../src/api/Delegations.ts"
import { GroupInput, type GroupMember, type GroupMemberInput } from "../../../src/api/Reviewers.ts"
import type { Problem } from "../api.ts"

export type MemberKind = "console_user" | "key_id"

/** A member as a form holds it: who (a console person's name or a key's id) and an address, empty for none. */
export interface MemberDraft {
  readonly kind: MemberKind
  readonly who: string
  readonly email: string
}

export const emptyMember = (): MemberDraft => ({ kind: "console_user", who: "", email: "" })

const personOf = (
  kind: MemberKind,
  who: string
): Reviewer => (kind === "key_id" ? { key_id: who.trim() } : { console_user: who })

/** A new member: the address only when one is typed in. */
export const memberInput = (draft: MemberDraft): GroupMemberInput => {
  const email = draft.email.trim()
  return { ...personOf(draft.kind, draft.who), ...(email === "" ? {} : { email }) }
}

export const delegateOf = (kind: MemberKind, who: string): Reviewer => personOf(kind, who)

/**
 * The members as they stand, without their addresses: an absent `email`
 * leaves an address as it is, where sending it back would send a pending
 * one a new confirmation mail.
 */
const unchanged = (members: ReadonlyArray<GroupMember>): Array<GroupMemberInput> =>
  members.map((member) =>
    member.key_id !== undefined ? { key_id: member.key_id } : { console_user: member.console_user ?? "" }
  )

export const createPayload = (drafts: ReadonlyArray<MemberDraft>): GroupInput => ({ members: drafts.map(memberInput) })

export const addPayload = (members: ReadonlyArray<GroupMember>, draft: MemberDraft): GroupInput => ({
  members: [...unchanged(members), memberInput(draft)]
})

export const removePayload = (members: ReadonlyArray<GroupMember>, index: number): GroupInput => ({
  members: unchanged(members).filter((_, i) => i !== index)
})

/** Sets (a new address: pending, sent a confirmation mail) or clears (`null`) one member's address. */
export const addressPayload = (
  members: ReadonlyArray<GroupMember>,
  index: number,
  email: string | null
): GroupInput => ({
  members: unchanged(members).map((member, i) => (i === index ? { ...member, email } : member))
})

/** A person as a page names them. */
export const reviewerText = (reviewer: Reviewer): string =>
  reviewer.console_user !== undefined ? reviewer.console_user : `API key ${reviewer.key_id ?? ""}`

export interface FieldIssue {
  /** The field as the API names it (`members[1].email`); "" for the request as a whole. */
  readonly field: string
  readonly message: string
}

/** `["members", 1, "email"]` → `members[1].email`, the API's naming of fields. */
export const fieldPath = (segments: ReadonlyArray<PropertyKey>): string =>
  segments.reduce<string>(
    (out, segment) =>
      typeof segment === "number" ? `${out}[${segment}]` : out === "" ? String(segment) : `${out}.${String(segment)}`,
    ""
  )

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

const issuesOf = (issue: SchemaIssue.Issue, under: ReadonlyArray<PropertyKey> = []): ReadonlyArray<FieldIssue> =>
  formatIssues(issue).issues.map((one) => ({
    field: fieldPath([
      ...under,
      ...(one.path ?? []).map((segment) => (typeof segment === "object" ? segment.key : segment))
    ]),
    message: one.message
  }))

const check = <S extends Schema.Top & { readonly DecodingServices: never }>(
  schema: S,
  value: unknown,
  under: ReadonlyArray<PropertyKey> = []
) =>
  Result.match(Schema.decodeUnknownResult(schema, { errors: "all" })(value), {
    onSuccess: (): ReadonlyArray<FieldIssue> => [],
    onFailure: (error) => issuesOf(error.issue, under)
  })

/**
 * What the API would refuse of a group's `PUT`, by the contract's schemas
 * (the typed client would refuse it too, as a failure of its own without
 * the fields): the name, then each member.
 */
export const checkGroup = (name: string, payload: GroupInput): ReadonlyArray<FieldIssue> => [
  ...check(GroupName, name, ["name"]),
  ...check(GroupInput, payload)
]

export const checkDelegation = (payload: DelegationInput): ReadonlyArray<FieldIssue> => check(DelegationInput, payload)

/** A field named in a detail: the API's 404 for a member key names `members[i].key_id`. */
const NAMED_FIELD = /\b((?:members\[\d+\]|delegate)\.key_id)\b/

/** Problems of the session or the service, which the shared words say best. */
const GENERAL = new Set([
  "INSUFFICIENT_SCOPE",
  "UNAUTHENTICATED",
  "CROSS_SITE_REQUEST",
  "SERVICE_UNAVAILABLE",
  "NETWORK"
])

/**
 * An API problem as the fields it names: each of its `errors`, its
 * `field`, a field its detail names, or else one issue about the whole
 * request, in `describe`'s words when the detail is not the best (a
 * session's problem).
 */
export const problemIssues = (problem: Problem, describe: (problem: Problem) => string): ReadonlyArray<FieldIssue> => {
  const error = problem.error ?? {}
  const listed = error.errors
  if (Array.isArray(listed) && listed.length > 0) return listed as ReadonlyArray<FieldIssue>
  const message = GENERAL.has(problem.code) ? describe(problem) : problem.detail ?? describe(problem)
  if (typeof error.field === "string") return [{ field: error.field, message }]
  return [{ field: NAMED_FIELD.exec(problem.detail ?? "")?.[1] ?? "", message }]
}

/** A field in words: `members[1].email` → "Member 2, address". */
export const fieldLabel = (field: string): string => {
  const member = /^members\[(\d+)\](?:\.(\w+))?/.exec(field)
  if (member) {
    const part = member[2] === "email"
      ? ", address"
      : member[2] === "key_id"
      ? ", API key"
      : member[2] === "console_user"
      ? ", console person"
      : ""
    return `Member ${Number(member[1]) + 1}${part}`
  }
  const labels: Record<string, string> = {
    name: "Name",
    members: "Members",
    delegate: "Delegate to",
    "delegate.key_id": "Delegate to, API key",
    "delegate.console_user": "Delegate to, console person",
    starts_at: "Starts",
    ends_at: "Ends"
  }
  return labels[field] ?? field
}

/** `2026-11-26T09:30` (a `datetime-local` value, the browser's time zone) → an RFC 3339 instant; "" stays "". */
export const instantOf = (local: string): string => {
  if (local.trim() === "") return ""
  const date = new Date(local)
  return Number.isNaN(date.getTime()) ? local : date.toISOString()
}

/** A `datetime-local` value `days` from `now`, in the browser's time zone. */
export const localIn = (now: number, days: number): string => {
  const date = new Date(now + days * 86_400_000)
  const pad = (n: number) => String(n).padStart(2, "0")
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${
    pad(date.getMinutes())
  }`
}
