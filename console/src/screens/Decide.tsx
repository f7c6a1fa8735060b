/**
 * `/console/decide#<token>`: the page a reviewer mail links to. The token is
 * in the fragment (browsers never send it, so it reaches no server log) and
 * opens this one approval: the page reads it (which changes nothing, so a
 * mail scanner that follows the link decides nothing) and the person
 * presses Approve or Reject. Nobody is signed in: no cookie is set, and
 * the rest of the console still needs a sign-in link. A link whose address
 * was replaced or removed from the settings since opens nothing.
 */
import { Exit } from "effect"
import { useEffect, useRef, useState } from "preact/hooks"
import type { ApprovalLinkView } from "../../../src/api/ApprovalLinks.ts"
import { problemOf, SvcApi } from "../api.ts"
import { Assignment, EarlierSteps, EditFields, editPayload, hasVoted, Outcome, ReasonField, Votes } from "../approval-parts.tsx"
import { runMutation, useMutation } from "../atoms.ts"
import { fragmentToken } from "../fragment.ts"
import { describeProblem, formatDuration, Json, Refusal, refusalOf, type RefusalValue, Time, useNow } from "../ui.tsx"

type View = typeof ApprovalLinkView.Type

const openAtom = SvcApi.mutation("approvalLinks", "open")
const decideAtom = SvcApi.mutation("approvalLinks", "decide")

const REPLACED =
  "The address this mail went to is no longer the organization's reviewer address (or, for a group member's mail, the member's own), so its links open nothing. Decide in the console, or through a mail to the current address."

const tokenOf = () => fragmentToken(location.hash)

type Loaded =
  | { readonly kind: "loading" }
  | { readonly kind: "invalid"; readonly text: string }
  | { readonly kind: "view"; readonly view: View }

export const Decide = () => {
  const [token] = useState(tokenOf)
  const [state, setState] = useState<Loaded>(token === "" ? { kind: "invalid", text: "" } : { kind: "loading" })
  const [notice, setNotice] = useState<{ tone: "success" | "warning" | "error"; text: string } | undefined>(undefined)
  const [reason, setReason] = useState("")
  /** The latest refused Approve or Reject, said under the buttons. */
  const [refusal, setRefusal] = useState<RefusalValue | undefined>(undefined)
  // The edited arguments (undefined: not touched, the step's own) and an answer to the agent.
  const [args, setArgs] = useState<string | undefined>(undefined)
  const [response, setResponse] = useState("")
  const decide = useMutation(decideAtom)
  const heading = useRef<HTMLHeadingElement>(null)
  const now = useNow()

  const load = async () => {
    const exit = await runMutation(openAtom, { payload: { token } })
    if (Exit.isSuccess(exit)) return setState({ kind: "view", view: exit.value })
    const problem = problemOf(exit.cause)
    setState({
      kind: "invalid",
      text: problem.code === "APPROVAL_LINK_INVALID"
        ? "This link opens no approval of this service."
        : problem.code === "REVIEWER_ADDRESS_REPLACED"
        ? REPLACED
        : `The approval could not be read: ${describeProblem(problem)}`
    })
  }
  useEffect(() => {
    document.title = "Approval · svc"
    if (token !== "") void load()
  }, [])
  useEffect(() => heading.current?.focus(), [state.kind, state.kind === "view" ? state.view.approval.status : ""])

  const submit = async (decision: "approve" | "reject") => {
    const given = reason.trim()
    const original = state.kind === "view" ? state.view.approval.arguments : null
    const edit = args === undefined && decision === "approve" ? {} : editPayload(decision, original, args ?? "", response)
    const item = state.kind === "view" ? state.view.approval : undefined
    const what = `${decision === "approve" ? "Approve" : "Reject"} of ${item?.tool} (${item?.action_class}, approval ${item?.approval_id})`
    setNotice(undefined)
    setRefusal(undefined)
    if (typeof edit === "string") return setRefusal({ what, why: `Nothing was sent: ${edit}` })
    const exit = await decide.run({ payload: given === "" ? { token, decision, ...edit } : { token, decision, reason: given, ...edit } })
    if (Exit.isSuccess(exit)) {
      setState({ kind: "view", view: exit.value })
      if (exit.value.approval.status === "pending") {
        return setNotice({ tone: "success", text: "Your approval is recorded. The approval needs more from other people before the agent may go ahead." })
      }
      return setNotice({ tone: "success", text: decision === "approve" ? "Approved. The agent may go ahead." : "Rejected. The agent will not run this step." })
    }
    const problem = problemOf(exit.cause)
    if (problem.code === "REVIEWER_ADDRESS_REPLACED") return setState({ kind: "invalid", text: REPLACED })
    if (problem.code === "ALREADY_VOTED") return setRefusal({ what, why: "This address has already voted on this approval." })
    if (problem.code === "NOT_ASSIGNED") {
      const decider = state.kind === "view" ? state.view.decider : "email:"
      return setRefusal({
        what,
        why: !decider.startsWith("email:")
          ? `This approval is assigned to a reviewer group ${decider} is not in (any more): its members decide it.`
          : "This approval is assigned to a reviewer group: decide it in the console as one of its members."
      })
    }
    if (problem.code === "INVALID_TRANSITION") {
      setNotice({ tone: "warning", text: "This approval was closed meanwhile; your decision was not recorded." })
      return load()
    }
    setRefusal(refusalOf(what, problem))
  }

  if (state.kind === "loading") return <main id="main" class="narrow"><p class="muted" aria-busy="true">Loading the approval…</p></main>
  if (state.kind === "invalid") {
    return (
      <main id="main" class="narrow">
        <h1 ref={heading} tabIndex={-1}>Cannot open this approval</h1>
        <p class="notice error" role="alert">
          {state.text === "" ? "This page needs the whole link of the mail, including the part after #." : state.text}
        </p>
        <p>Open the link of the latest mail about it, or decide in the console.</p>
      </main>
    )
  }
  const { view } = state
  const item = view.approval
  const pending = item.status === "pending"
  const left = Date.parse(item.deadline_at) - now
  return (
    <main id="main" class="narrow wide-enough">
      <h1 ref={heading} tabIndex={-1}>
        {pending ? "Approval requested" : item.status === "expired" ? "Approval expired" : item.status === "approved" ? "Approval approved" : "Approval rejected"}:{" "}
        {item.tool}
      </h1>
      <div role="status" aria-live="polite">
        {notice && <p class={`notice ${notice.tone}`}>{notice.text}</p>}
      </div>
      <dl class="facts">
        <div><dt>Task</dt><dd>{view.task_name ?? "none"}</dd></div>
        <div><dt>Tool</dt><dd>{item.tool}</dd></div>
        <div><dt>Action class</dt><dd>{item.action_class}</dd></div>
        <Assignment item={item} />
        <div><dt>Requested</dt><dd><Time iso={item.requested_at} /></dd></div>
        {pending && (
          <div>
            <dt>{item.escalation === "pending" ? "Escalates in" : "Expires in"}</dt>
            <dd class="countdown" aria-live="off"><time dateTime={item.deadline_at}>{left > 0 ? formatDuration(left) : "now"}</time></dd>
          </div>
        )}
        <div><dt>If nobody decides</dt><dd>{item.timeout_action} (at <Time iso={item.expires_at} />)</dd></div>
      </dl>
      <h2>Arguments</h2>
      <Json value={item.arguments} label={`Arguments of ${item.tool}`} />
      <Votes item={item} headingLevel={2} />
      <EarlierSteps context={view} headingLevel={2} />
      {pending && hasVoted(item, view.decider)
        ? (
          <section aria-labelledby="decide-title" class="decide">
            <h2 id="decide-title">Your decision</h2>
            <p class="notice info voted">You voted on this approval as <strong>{view.decider}</strong>. It waits for {item.approvals_remaining ?? 1} more approval{(item.approvals_remaining ?? 1) === 1 ? "" : "s"} from someone else.</p>
          </section>
        )
        : pending && item.assigned_group !== undefined && view.decider.startsWith("email:")
        ? (
          <section aria-labelledby="decide-title" class="decide">
            <h2 id="decide-title">Who decides</h2>
            <p class="notice info not-assigned">
              This approval is assigned to the reviewer group <strong>{item.assigned_group}</strong>: its members (or their delegates) decide it
              in the console. This mail's link shows it but cannot decide it.
            </p>
          </section>
        )
        : pending && item.quorum !== undefined && view.decider.startsWith("email:")
        ? (
          <section aria-labelledby="decide-title" class="decide">
            <h2 id="decide-title">Who decides</h2>
            <p class="notice info person-required">
              This approval needs {item.quorum} different people to approve it. This mail went to the organization's shared reviewer address,
              which names no one person, so its link shows the approval but cannot vote: decide in the console, or through a mail to your own
              address.
            </p>
          </section>
        )
        : pending
        ? (
          <section aria-labelledby="decide-title" class="decide">
            <h2 id="decide-title">Your decision</h2>
            <p class="muted">Recorded as <strong>{view.decider}</strong>. This page opens this approval only; it signs you in to nothing.</p>
            <ReasonField id="reason" value={reason} onInput={setReason} disabled={decide.busy} />
            <EditFields
              id="edit"
              args={args ?? JSON.stringify(item.arguments, null, 2)}
              onArgs={setArgs}
              response={response}
              onResponse={setResponse}
              disabled={decide.busy}
              quorum={item.quorum}
            />
            <div class="actions">
              <button type="button" class="primary" disabled={decide.busy} onClick={() => submit("approve")}>Approve</button>
              <button type="button" class="danger" disabled={decide.busy} onClick={() => submit("reject")}>Reject</button>
            </div>
            <Refusal id="decide-refusal" refusal={refusal} onDismiss={() => setRefusal(undefined)} />
          </section>
        )
        : (
          <section aria-labelledby="final-title" class="final">
            <h2 id="final-title">Final state</h2>
            <Outcome item={item} />
          </section>
        )}
    </main>
  )
}
