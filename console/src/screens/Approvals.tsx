/**
 * "Approvals": the organization's pending approvals, kept live by the
 * organization-wide event stream (`GET /v1/agent-approvals/events/stream`;
 * the browser's EventSource resumes with `Last-Event-ID` after a drop, and
 * the list is fetched again on every (re)connection so nothing is missed).
 */
import { Exit, Schema } from "effect"
import { useEffect, useMemo, useRef, useState } from "preact/hooks"
import { ApprovalListItem } from "../../../src/api/Approvals.ts"
import type { ConsoleSession } from "../../../src/api/Console.ts"
import { problemOf, SvcApi } from "../api.ts"
import { refresh, runMutation, useMutation } from "../atoms.ts"
import { has, sessionAtom } from "../session.ts"
import { describeProblem, formatDuration, Json, Notice, type NoticeValue, Time, useNow } from "../ui.tsx"

type Approval = typeof ApprovalListItem.Type

const listAtom = SvcApi.mutation("approvals", "list")
const decideAtom = SvcApi.mutation("approvals", "decide")
const decodeItem = Schema.decodeUnknownExit(Schema.fromJsonString(ApprovalListItem))

const STREAM = "/v1/agent-approvals/events/stream"
const EVENTS = ["approval.requested", "approval.expiring", "approval.escalated", "approval.approved", "approval.rejected", "approval.expired"] as const

type Connection = "connecting" | "live" | "reconnecting"

export const Approvals = ({ session }: { session: ConsoleSession }) => {
  const [pending, setPending] = useState<ReadonlyMap<string, Approval>>(new Map())
  const [loaded, setLoaded] = useState(false)
  const [connection, setConnection] = useState<Connection>("connecting")
  const [notice, setNotice] = useState<NoticeValue | undefined>(undefined)
  /** Approvals this console decided itself: their closing events are not news. */
  const mine = useRef(new Set<string>())
  const canDecide = has(session.scopes, "approvals.decide")
  const shown = useRef<ReadonlyMap<string, Approval>>(pending)
  shown.current = pending

  useEffect(() => {
    let closed = false
    const load = async () => {
      const exit = await runMutation(listAtom, { query: { status: "pending", limit: 100 } })
      if (closed) return
      if (Exit.isSuccess(exit)) {
        setPending(new Map(exit.value.approvals.map((item) => [item.approval_id, item])))
        setLoaded(true)
      } else {
        setNotice({ tone: "error", text: `Could not load approvals: ${describeProblem(problemOf(exit.cause))}` })
      }
    }
    const source = new EventSource(STREAM)
    source.onopen = () => {
      setConnection("live")
      void load()
    }
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) {
        // Refused for good (the session ended, or too many streams): ask who we are; the console follows.
        setConnection("connecting")
        refresh(sessionAtom)
      } else setConnection("reconnecting")
    }
    const onEvent = (event: MessageEvent<string>) => {
      const decoded = decodeItem(event.data)
      if (Exit.isFailure(decoded)) return
      const item = decoded.value
      // Only a change to an approval on screen is news (a new stream may replay older events first).
      const onScreen = shown.current.has(item.approval_id)
      setPending((current) => {
        const next = new Map(current)
        if (item.status === "pending") next.set(item.approval_id, item)
        else next.delete(item.approval_id)
        return next
      })
      if (item.status !== "pending" && onScreen && !mine.current.has(item.approval_id)) {
        setNotice({
          tone: "info",
          text: item.status === "expired"
            ? `An approval for ${item.tool} expired: ${item.timeout_action === "allow" ? "allowed" : "rejected"} by its timeout action.`
            : `An approval for ${item.tool} was ${item.status} elsewhere${item.decided_by ? ` by ${item.decided_by}` : ""}.`
        })
      }
    }
    for (const name of EVENTS) source.addEventListener(name, onEvent)
    return () => {
      closed = true
      source.close()
    }
  }, [])

  const items = useMemo(
    () => [...pending.values()].sort((a, b) => a.expires_at.localeCompare(b.expires_at)),
    [pending]
  )

  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title" tabIndex={-1}>Approvals</h1>
      <p class="muted" role="status">
        {connection === "live" ? "Live: new and decided approvals appear here by themselves." : connection === "reconnecting" ? "Reconnecting to the live stream…" : "Connecting…"}
      </p>
      <Notice notice={notice} onClose={() => setNotice(undefined)} />
      {!loaded
        ? <p class="muted" aria-busy="true">Loading approvals…</p>
        : items.length === 0
        ? <p class="empty">No approval is waiting for a decision.</p>
        : (
          <ul class="cards" aria-label="Pending approvals">
            {items.map((item) => (
              <ApprovalCard
                key={item.approval_id}
                item={item}
                canDecide={canDecide}
                onDecided={(decision) => {
                  mine.current.add(item.approval_id)
                  setPending((current) => {
                    const next = new Map(current)
                    next.delete(item.approval_id)
                    return next
                  })
                  setNotice({ tone: "success", text: `${decision === "approve" ? "Approved" : "Rejected"}: ${item.tool} (${item.action_class}).` })
                }}
                onGone={(text) => {
                  setPending((current) => {
                    const next = new Map(current)
                    next.delete(item.approval_id)
                    return next
                  })
                  setNotice({ tone: "warning", text })
                }}
                onError={(text) => setNotice({ tone: "error", text })}
              />
            ))}
          </ul>
        )}
    </section>
  )
}

const ApprovalCard = (
  { item, canDecide, onDecided, onGone, onError }: {
    item: Approval
    canDecide: boolean
    onDecided: (decision: "approve" | "reject") => void
    onGone: (text: string) => void
    onError: (text: string) => void
  }
) => {
  const now = useNow()
  const decide = useMutation(decideAtom)
  const left = Date.parse(item.deadline_at) - now
  const titleId = `approval-${item.approval_id}`
  const submit = async (decision: "approve" | "reject") => {
    const exit = await decide.run({ params: { approval_id: item.approval_id }, payload: { decision } })
    if (Exit.isSuccess(exit)) return onDecided(decision)
    const problem = problemOf(exit.cause)
    if (problem.code === "INVALID_TRANSITION" || problem.code === "NOT_FOUND") {
      return onGone(`This approval was closed elsewhere meanwhile${problem.error?.status_now ? ` (${String(problem.error.status_now)})` : ""}; nothing was changed.`)
    }
    onError(`Could not ${decision}: ${describeProblem(problem)}`)
  }
  return (
    <li class="card" aria-labelledby={titleId}>
      <h2 id={titleId}>{item.tool} <span class="muted">· {item.action_class}</span></h2>
      <dl class="facts">
        <div>
          <dt>{item.escalation === "pending" ? "Escalates in" : "Expires in"}</dt>
          <dd class="countdown" aria-live="off">
            <time dateTime={item.deadline_at}>{left > 0 ? formatDuration(left) : "now"}</time>
          </dd>
        </div>
        <div>
          <dt>Escalation</dt>
          <dd>{item.escalation === "none" ? "none" : item.escalation === "pending" ? "at the deadline, with more review time" : "escalated"}</dd>
        </div>
        <div><dt>If nobody decides</dt><dd>{item.timeout_action} (at <Time iso={item.expires_at} />)</dd></div>
        <div><dt>Task</dt><dd>{item.task_id ?? "none"}</dd></div>
        <div><dt>Requested</dt><dd><Time iso={item.requested_at} /></dd></div>
      </dl>
      <h3>Arguments</h3>
      <Json value={item.arguments} label={`Arguments of ${item.tool}`} />
      {canDecide && (
        <div class="actions">
          <button type="button" class="primary" disabled={decide.busy} onClick={() => submit("approve")}>Approve</button>
          <button type="button" class="danger" disabled={decide.busy} onClick={() => submit("reject")}>Reject</button>
        </div>
      )}
    </li>
  )
}
