/** Pieces the approvals screen and the page of a reviewer mail's link share. */
import type { Schema } from "effect"
import type { ApprovalContext, ApprovalListItem } from "../../src/api/Approvals.ts"
import { Json, Time } from "./ui.tsx"

type Approval = typeof ApprovalListItem.Type
type Context = typeof ApprovalContext.Type

/** The longest reason the API takes (characters). */
export const MAX_REASON = 1000

/** The names of the API keys an approval names, by id (`key_names`). */
export type KeyNames = Readonly<Record<string, string>> | undefined

/**
 * Who decided, in words: `console:<person>`, `email:<address>`, or an API
 * key by its name (`key_names`); an unnamed key by its whole id, which the
 * API keys screen lists to match it.
 */
export const deciderName = (decidedBy: string | undefined, names?: KeyNames): string => {
  if (decidedBy === undefined) return "nobody"
  if (decidedBy.startsWith("console:")) return `${decidedBy.slice("console:".length)} (console)`
  if (decidedBy.startsWith("email:")) return `${decidedBy.slice("email:".length)} (reviewer mail)`
  const name = names?.[decidedBy]
  return name === undefined ? `unnamed API key ${decidedBy}` : `${name} (API key)`
}

/**
 * Who decided, shown: a decision through a reviewer mail's link carries a
 * "reviewer mail" badge beside the address the mail went to, so it is not
 * taken for a console user or an API key; a named key keeps its id at hand.
 */
export const Decider = ({ decidedBy, names }: { decidedBy: string | undefined; names?: KeyNames }) => {
  if (decidedBy !== undefined && names?.[decidedBy] !== undefined) {
    return <span class="decider-key" title={`API key ${decidedBy}`}>{deciderName(decidedBy, names)}</span>
  }
  if (decidedBy === undefined || !decidedBy.startsWith("email:")) return <>{deciderName(decidedBy, names)}</>
  const address = decidedBy.slice("email:".length)
  return (
    <span class="decider-mail" title={`Decided through the link of a reviewer mail sent to ${address}`}>
      <span class="badge mail">reviewer mail</span> <span class="address">{address}</span>
    </span>
  )
}

/**
 * Who a decision stands for, beside its decider: the person behind an API
 * key (a key a console person made is theirs) and the member a delegate
 * decided in place of (docs/approvals.md, "Who counts as whom").
 */
export const StandsFor = ({ person, decidedFor, names }: { person: string | undefined; decidedFor: string | undefined; names?: KeyNames }) => (
  <>
    {person !== undefined && <span class="stands-for"> · belongs to {deciderName(person, names)}</span>}
    {decidedFor !== undefined && <span class="stands-for"> · for {deciderName(decidedFor, names)}, as their delegate</span>}
  </>
)

const resolutionWords: Record<string, string> = { allow: "allowed", reject: "rejected", pending: "waiting" }

/** The session's steps before this one: what the agent did so far. */
export const EarlierSteps = ({ context, headingLevel = 3 }: { context: Context | undefined; headingLevel?: 2 | 3 }) => {
  const Heading = headingLevel === 2 ? "h2" : "h3"
  if (context === undefined) return <><Heading>Earlier steps in this session</Heading><p class="muted">Loading…</p></>
  const steps = context.earlier_steps
  return (
    <>
      <Heading>Earlier steps in this session ({context.earlier_steps_total})</Heading>
      {steps.length === 0
        ? <p class="muted">None: this is the session's first step.</p>
        : (
          <>
            {context.earlier_steps_total > steps.length && (
              <p class="muted">The latest {steps.length} of {context.earlier_steps_total}:</p>
            )}
            <ol class="steps" aria-label="Earlier steps in this session">
              {steps.map((step) => (
                <li key={step.step_id}>
                  <span class="step-tool">{step.tool}</span> <span class="muted">· {step.action_class}</span>{" "}
                  <span class={`badge ${step.resolution === "allow" ? "delivered" : step.resolution === "reject" ? "rejected" : "pending"}`}>
                    {resolutionWords[step.resolution] ?? step.resolution}
                  </span>
                  {step.rule !== undefined && <span class="muted"> · rule {step.rule}</span>}
                  {step.outcome !== undefined && <span class="muted"> · tool {step.outcome}</span>}
                </li>
              ))}
            </ol>
          </>
        )}
    </>
  )
}

/** How a closed approval ended: who, when and why. */
export const Outcome = ({ item }: { item: Approval }) => {
  if (item.status === "expired") {
    return (
      <p>
        <strong>Expired</strong> at <Time iso={item.expires_at} /> without a decision:{" "}
        {item.timeout_action === "allow" ? "allowed" : "rejected"} by its timeout action.
      </p>
    )
  }
  return (
    <>
      <p>
        <strong>{item.status === "approved" ? "Approved" : "Rejected"}</strong> by <Decider decidedBy={item.decided_by} names={keyNames(item)} />
        <StandsFor person={item.decided_by_person} decidedFor={item.decided_for} names={keyNames(item)} /> at{" "}
        <Time iso={item.decided_at} />.
      </p>
      {item.decision_reason !== undefined && <blockquote class="reason">{item.decision_reason}</blockquote>}
      {item.approved_arguments !== undefined && (
        <>
          <p>With edited arguments (changed: {(item.arguments_changed ?? []).join(", ") || "nothing"}); the tool runs with these:</p>
          <Json value={item.approved_arguments} label="Approved arguments" />
        </>
      )}
      {item.response !== undefined && (
        <>
          <p>Answered the agent instead of running the tool:</p>
          <blockquote class="reason">{typeof item.response === "string" ? item.response : JSON.stringify(item.response)}</blockquote>
        </>
      )}
    </>
  )
}

/**
 * The votes of an approval that several people must approve: how many
 * approvals it needs, who voted so far (when, how, why) and how many remain.
 * Nothing for an approval one decision closes.
 */
/** Whether `decider` has voted on the approval (with a quorum: then they cannot vote again). */
export const hasVoted = (item: Approval, decider: string) => (item.votes ?? []).some((vote) => vote.decided_by === decider)

/** The key names an approval carries (the page of a mail's link reads a view without them). */
export const keyNames = (item: Approval): KeyNames => item.key_names

/** The reviewer group an approval is assigned to, as a fact of its card. */
export const Assignment = ({ item }: { item: Approval }) =>
  item.assigned_group === undefined ? null : (
    <div>
      <dt>Assigned to</dt>
      <dd>
        <span class="badge">{item.assigned_group}</span>
        {(item.escalation_level ?? 0) > 0 && <span class="muted"> · escalated to this group (escalation {item.escalation_level})</span>}
      </dd>
    </div>
  )

/** Why a person must decide: the policy's rule on arguments that required the approval, or the action class's settings. */
export const RequiredBy = ({ item }: { item: Approval }) => (
  <div>
    <dt>Required by</dt>
    <dd>{item.rule === undefined ? "the action class's policy settings" : <>rule <strong class="rule-name">{item.rule}</strong></>}</dd>
  </div>
)

/** The reviewer groups an approval's escalation chain still hands it to (pending), or the whole chain and how far it went. */
export const Chain = ({ item }: { item: Approval }) => {
  const chain = item.escalation_chain
  if (chain === undefined) return null
  const level = item.escalation_level ?? 0
  const next = chain.slice(level)
  if (item.status === "pending") {
    return (
      <div>
        <dt>Escalates next to</dt>
        <dd>{next.length === 0 ? "nobody: the chain's last group has it" : next.map((group, i) => <>{i > 0 && " → "}<span class="badge" key={group}>{group}</span></>)}</dd>
      </div>
    )
  }
  return (
    <div>
      <dt>Escalation chain</dt>
      <dd>{chain.join(" → ")}{level > 0 ? ` (reached ${chain[level - 1]})` : " (not reached)"}</dd>
    </div>
  )
}

export const Votes = ({ item, headingLevel = 3 }: { item: Approval; headingLevel?: 2 | 3 }) => {
  if (item.quorum === undefined) return null
  const Heading = headingLevel === 2 ? "h2" : "h3"
  const votes = item.votes ?? []
  const approvals = votes.filter((vote) => vote.decision === "approve").length
  return (
    <section class="votes" aria-label="Votes">
      <Heading>Votes: {approvals} of {item.quorum} approvals</Heading>
      <p class="muted">
        {item.status === "pending"
          ? `Needs ${item.approvals_remaining ?? item.quorum - approvals} more approval${(item.approvals_remaining ?? 0) === 1 ? "" : "s"} from different people; one rejection rejects it. Each person votes once, whichever of their keys they use, and a delegate votes in place of the member who delegated.`
          : `${item.quorum} different people had to approve; one rejection rejected it.`}
      </p>
      {votes.length === 0
        ? <p class="muted">No vote yet.</p>
        : (
          <ol class="vote-list" aria-label="Votes so far">
            {votes.map((vote) => (
              <li key={vote.decided_by}>
                <span class={`badge ${vote.decision === "approve" ? "delivered" : "rejected"}`}>
                  {vote.decision === "approve" ? "approved" : "rejected"}
                </span>{" "}
                <Decider decidedBy={vote.decided_by} names={keyNames(item)} />
                <StandsFor person={vote.decided_by_person} decidedFor={vote.decided_for} names={keyNames(item)} />{" "}
                <span class="muted">at <Time iso={vote.decided_at} /></span>
                {vote.reason !== undefined && <blockquote class="reason">{vote.reason}</blockquote>}
              </li>
            ))}
          </ol>
        )}
    </section>
  )
}

/** The optional reason a person gives with Approve or Reject. */
export const ReasonField = (
  { id, value, onInput, disabled }: { id: string; value: string; onInput: (value: string) => void; disabled?: boolean }
) => (
  <label for={id} class="reason-field">
    Reason (optional)
    <textarea
      id={id}
      rows={2}
      maxLength={MAX_REASON}
      value={value}
      disabled={disabled}
      aria-describedby={`${id}-hint`}
      onInput={(event) => onInput((event.target as HTMLTextAreaElement).value)}
    />
    <span id={`${id}-hint`} class="hint">
      Sent with Approve or Reject to the agent and the webhooks; at most {MAX_REASON} characters ({value.length} used).
    </span>
  </label>
)

/**
 * Edit the arguments before approving, or answer the agent instead of
 * running the tool. The service checks edited arguments against the action
 * class's `arguments_schema` (and refuses them when it declares none).
 */
/**
 * The arguments editor and the answer to the agent. An approval that needs
 * several approvals takes no edits (every approver approves the same
 * arguments), so for one (`quorum`) only the answer is offered.
 */
export const EditFields = (
  { id, args, onArgs, response, onResponse, disabled, quorum }: {
    id: string
    args: string
    onArgs: (value: string) => void
    response: string
    onResponse: (value: string) => void
    disabled?: boolean
    quorum?: number | undefined
  }
) => (
  <details class="edits">
    <summary>{quorum === undefined ? "Edit the arguments, or answer instead" : "Answer the agent instead"}</summary>
    {quorum === undefined
      ? (
        <label for={`${id}-args`} class="reason-field">
          Arguments to run with (JSON, sent with Approve)
          <textarea id={`${id}-args`} rows={6} class="mono" value={args} disabled={disabled} spellcheck={false}
            onInput={(event) => onArgs((event.target as HTMLTextAreaElement).value)} />
          <span class="hint">Checked against the action class's arguments schema; the agent runs the tool with these.</span>
        </label>
      )
      : <p class="hint">{quorum} people approve the same arguments, so they cannot be edited here.</p>}
    <label for={`${id}-response`} class="reason-field">
      Answer to the agent (sent with Reject)
      <textarea id={`${id}-response`} rows={2} value={response} disabled={disabled}
        onInput={(event) => onResponse((event.target as HTMLTextAreaElement).value)} />
      <span class="hint">The tool does not run; the agent gets this answer.</span>
    </label>
  </details>
)

/** What Approve or Reject sends beside the reason: edited arguments (when changed) or an answer; a string when the arguments are not JSON. */
export const editPayload = (decision: "approve" | "reject", original: unknown, args: string, response: string) => {
  if (decision === "reject") return response.trim() === "" ? {} : { response: response.trim() }
  let parsed: Schema.Json
  try {
    parsed = JSON.parse(args) as Schema.Json
  } catch (error) {
    return `the edited arguments are not JSON (${String(error)}).`
  }
  return JSON.stringify(parsed) === JSON.stringify(original) ? {} : { arguments: parsed }
}
