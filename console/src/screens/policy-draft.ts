/**
 * A policy as the Policies screen edits it: text fields as typed, turned
 * into the API's `PolicyInput` when saved or tried. The service checks it
 * (the same schema the typed client encodes with); only JSON text is read
 * here, since the API takes values, not text.
 */
import type { Policy, PolicyInput, PolicyMode, RuleResult, TimeoutAction } from "../../../src/api/Policies.ts"

export interface DeadlineDraft {
  readonly review: string
  readonly notice: string
  /** Empty: no escalation. */
  readonly escalation: string
  readonly timeout: TimeoutAction
  /** Empty: one approval. */
  readonly quorum: string
  /** The reviewer group it is assigned to; empty: none. */
  readonly group: string
  /** The groups its deadlines hand it to, in order, comma-separated; empty: none. */
  readonly escalationChain: string
}

export type RuleDecision = RuleResult["decision"]

export interface RuleDraft {
  /** Stable across reordering, for rendering. */
  readonly key: number
  readonly name: string
  readonly condition: string
  readonly decision: RuleDecision
  readonly reason: string
  readonly deadlines: DeadlineDraft
}

export interface PolicyDraft {
  readonly mode: PolicyMode
  readonly deadlines: DeadlineDraft
  /** JSON text; empty: none. */
  readonly schema: string
  readonly rules: ReadonlyArray<RuleDraft>
}

let nextKey = 0

/** The settings an action class without a policy has (docs/approvals.md, "Policies"). */
export const DEFAULT_DEADLINES: DeadlineDraft = {
  review: "900",
  notice: "300",
  escalation: "",
  timeout: "reject",
  quorum: "",
  group: "",
  escalationChain: ""
}

export const newRule = (index: number): RuleDraft => ({
  key: nextKey++,
  name: `rule-${index + 1}`,
  condition: "",
  decision: "require_approval",
  reason: "",
  deadlines: DEFAULT_DEADLINES
})

export const emptyDraft = (): PolicyDraft => ({
  mode: "require_approval",
  deadlines: DEFAULT_DEADLINES,
  schema: "",
  rules: []
})

const text = (value: number | null | undefined) => (value === undefined || value === null ? "" : String(value))

const deadlinesOf = (
  source: {
    review_seconds: number
    expiring_notice_seconds: number
    escalation_seconds?: number | null
    timeout_action: TimeoutAction
    quorum?: number
    group?: string
    escalation_chain?: ReadonlyArray<string>
  }
): DeadlineDraft => ({
  review: String(source.review_seconds),
  notice: String(source.expiring_notice_seconds),
  escalation: text(source.escalation_seconds),
  timeout: source.timeout_action,
  quorum: text(source.quorum),
  group: source.group ?? "",
  escalationChain: (source.escalation_chain ?? []).join(", ")
})

export const draftOf = (policy: Policy): PolicyDraft => ({
  mode: policy.mode,
  deadlines: deadlinesOf(policy),
  schema: policy.arguments_schema === undefined ? "" : JSON.stringify(policy.arguments_schema, null, 2),
  rules: policy.rules.map((rule) => ({
    key: nextKey++,
    name: rule.name,
    condition: rule.condition,
    decision: rule.result.decision,
    reason: rule.result.decision === "reject" ? rule.result.reason : "",
    deadlines: rule.result.decision === "require_approval" ? deadlinesOf(rule.result) : DEFAULT_DEADLINES
  }))
})

/** A field the screen could not turn into a value: its `field` as the API would name it. */
export class DraftError extends Error {
  readonly field: string
  constructor(field: string, message: string) {
    super(message)
    this.field = field
  }
}

const seconds = (value: string) => Number(value.trim())

/** The chain's group names as typed: comma-separated, blanks around them dropped. */
const chainOf = (text: string) => text.split(",").map((name) => name.trim()).filter((name) => name !== "")

const deadlinesPayload = (draft: DeadlineDraft) => ({
  review_seconds: seconds(draft.review),
  expiring_notice_seconds: seconds(draft.notice),
  ...(draft.escalation.trim() === "" ? {} : { escalation_seconds: seconds(draft.escalation) }),
  timeout_action: draft.timeout,
  ...(draft.quorum.trim() === "" ? {} : { quorum: seconds(draft.quorum) }),
  ...(draft.group.trim() === "" ? {} : { group: draft.group.trim() }),
  ...(chainOf(draft.escalationChain).length === 0 ? {} : { escalation_chain: chainOf(draft.escalationChain) })
})

const resultPayload = (rule: RuleDraft): RuleResult => {
  switch (rule.decision) {
    case "allow":
      return { decision: "allow" }
    case "reject":
      return { decision: "reject", reason: rule.reason }
    case "require_approval":
      return { decision: "require_approval", ...deadlinesPayload(rule.deadlines) }
  }
}

/** The policy as the API takes it; throws `DraftError` for JSON that does not parse. */
export const payloadOf = (draft: PolicyDraft): PolicyInput => {
  let schema: PolicyInput["arguments_schema"]
  if (draft.schema.trim() !== "") {
    try {
      schema = JSON.parse(draft.schema)
    } catch (error) {
      throw new DraftError("arguments_schema", `Not JSON: ${(error as Error).message}`)
    }
  }
  return {
    mode: draft.mode,
    ...deadlinesPayload(draft.deadlines),
    rules: draft.rules.map((rule) => ({
      name: rule.name.trim(),
      condition: rule.condition,
      result: resultPayload(rule)
    })),
    ...(schema === undefined ? {} : { arguments_schema: schema })
  }
}

/**
 * Where a problem belongs: `rules[2].condition` (or any `rules[2]...`) to
 * the third rule, `arguments_schema` to the schema, anything else to the
 * policy as a whole.
 */
export const placeOf = (
  field: string | undefined
): { readonly rule: number } | { readonly schema: true } | undefined => {
  if (field === undefined) return undefined
  const rule = /^rules\[(\d+)\]/.exec(field)
  if (rule) return { rule: Number(rule[1]) }
  if (field === "arguments_schema" || field.startsWith("arguments_schema")) return { schema: true }
  return undefined
}

/** Moves the item at `from` by `by` places (within bounds). */
export const move = <A>(items: ReadonlyArray<A>, from: number, by: number): ReadonlyArray<A> => {
  const to = from + by
  if (to < 0 || to >= items.length) return items
  const copy = [...items]
  const [item] = copy.splice(from, 1)
  copy.splice(to, 0, item!)
  return copy
}
