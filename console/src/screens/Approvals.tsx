/**
 * "Approvals": the organization's pending approvals, kept live by the
 * organization-wide event stream (`GET /v1/agent-approvals/events/stream`;
 * the browser's EventSource resumes with `Last-Event-ID` after a drop, and
 * the list is fetched again on every (re)connection so nothing is missed).
 * Each card shows what a person needs to decide (the task's name, the tool,
 * the session's earlier steps) and takes an optional reason with Approve or
 * Reject. "Assigned to me" narrows them to those assigned to a reviewer
 * group the person is in (or was delegated by a member), as the list's
 * `assigned_to=me` answers. "History" lists closed approvals with who
 * decided, when and why. `?approval=<id>` is one approval's page (the
 * link the MCP gateway sends an agent's user to): its card alone, or where
 * it went once it is no longer pending.
 */
import { Exit, Schema } from "effect"
import { useEffect, useMemo, useRef, useState } from "preact/hooks"
import { type ApprovalContext, ApprovalListItem } from "../../../src/api/Approvals.ts"
import type { ConsoleSession } from "../../../src/api/Console.ts"
import { problemOf, SvcApi } from "../api.ts"
import { OwnAddress } from "./OwnAddress.tsx"
import { Assignment, Chain, deciderName, EarlierSteps, EditFields, editPayload, hasVoted, ReasonField, RequiredBy, Votes } from "../approval-parts.tsx"
import { History } from "./ApprovalHistory.tsx"
import { refresh, runMutation, useMutation } from "../atoms.ts"
import { setQuery, useLocation } from "../router.ts"
import { has, sessionAtom } from "../session.ts"
import { describeProblem, formatDuration, Json, Notice, type NoticeValue, Refusal, refusalOf, type RefusalValue, Time, useNow } from "../ui.tsx"

type Approval = typeof ApprovalListItem.Type
type Context = typeof ApprovalContext.Type

const listAtom = SvcApi.mutation("approvals", "list")
const decideAtom = SvcApi.mutation("approvals", "decide")
const contextAtom = SvcApi.mutation("approvals", "context")
const decodeItem = Schema.decodeUnknownExit(Schema.fromJsonString(ApprovalListItem))

const STREAM = "/v1/agent-approvals/events/stream"
const EVENTS = ["approval.requested", "approval.expiring", "approval.escalated", "approval.approved", "approval.rejected", "approval.expired"] as const

type Connection = "connecting" | "live" | "reconnecting"

/**
 * An approval this console tried to decide after it had closed elsewhere:
 * its card stays where it was with the refusal, until the person dismisses
 * it; the stream's later event for it adds who closed it (`event`).
 */
interface ClosedHere {
  readonly item: Approval
  readonly refusal: RefusalValue
  readonly event?: Approval
}

/** How an approval closed, as its closing event says. */
const closing = (item: Approval): string =>
  item.status === "expired"
    ? `It expired: ${item.timeout_action === "allow" ? "allowed" : "rejected"} by its timeout action.`
    : `It was ${item.status} by ${deciderName(item.decided_by, item.key_names)}${item.decision_reason ? `: “${item.decision_reason}”` : "."}`

export const Approvals = ({ session }: { session: ConsoleSession }) => {
  const [pending, setPending] = useState<ReadonlyMap<string, Approval>>(new Map())
  const [loaded, setLoaded] = useState(false)
  const [connection, setConnection] = useState<Connection>("connecting")
  const [notice, setNotice] = useState<NoticeValue | undefined>(undefined)
  const [closedHere, setClosedHere] = useState<ReadonlyMap<string, ClosedHere>>(new Map())
  /** Approvals this console decided itself: their closing events are not news. */
  const mine = useRef(new Set<string>())
  const canDecide = has(session.scopes, "approvals.decide")
  /**
   * Approvals whose closing is news: those the list showed as pending, and
   * those requested after it loaded. A new stream first replays the kept
   * history (requests and their closings, long past): those events arrive
   * before the list does and announce nothing.
   */
  const known = useRef(new Set<string>())
  const listed = useRef(false)
  const { query } = useLocation()
  const asked = query.get("view")
  /** One approval's page: that card alone. */
  const only = query.get("approval") ?? undefined
  const view = asked === "history" ? "history" : asked === "mine" ? "mine" : "pending"
  /** The pending approvals assigned to this person (`assigned_to=me`), read again when an assigned one changes. */
  const [assigned, setAssigned] = useState<ReadonlySet<string> | undefined>(undefined)
  /** Bumped whenever an approval closes, so an open history reloads. */
  const [closedCount, setClosedCount] = useState(0)

  useEffect(() => {
    let closed = false
    const loadAssigned = async () => {
      const exit = await runMutation(listAtom, { query: { status: "pending", assigned_to: "me", limit: 100 } })
      if (!closed && Exit.isSuccess(exit)) setAssigned(new Set(exit.value.approvals.map((item) => item.approval_id)))
    }
    const load = async () => {
      void loadAssigned()
      const exit = await runMutation(listAtom, { query: { status: "pending", limit: 100 } })
      if (closed) return
      if (Exit.isSuccess(exit)) {
        setPending(new Map(exit.value.approvals.map((item) => [item.approval_id, item])))
        known.current = new Set(exit.value.approvals.map((item) => item.approval_id))
        listed.current = true
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
      if (item.assigned_group !== undefined && listed.current) void loadAssigned()
      const news = listed.current && known.current.has(item.approval_id)
      if (item.status === "pending" && listed.current) known.current.add(item.approval_id)
      if (item.status !== "pending") known.current.delete(item.approval_id)
      setPending((current) => {
        const next = new Map(current)
        if (item.status === "pending") next.set(item.approval_id, item)
        else next.delete(item.approval_id)
        return next
      })
      if (item.status !== "pending") {
        setClosedCount((n) => n + 1)
        setClosedHere((current) => {
          const kept = current.get(item.approval_id)
          return kept === undefined ? current : new Map(current).set(item.approval_id, { ...kept, event: item })
        })
      }
      if (item.status !== "pending" && news && !mine.current.has(item.approval_id)) {
        setNotice({
          tone: "info",
          text: item.status === "expired"
            ? `An approval for ${item.tool} expired: ${item.timeout_action === "allow" ? "allowed" : "rejected"} by its timeout action.`
            : `An approval for ${item.tool} was ${item.status} elsewhere${item.decided_by ? ` by ${deciderName(item.decided_by, item.key_names)}` : ""}${
              item.decision_reason ? `: “${item.decision_reason}”` : ""
            }.`
        })
      }
    }
    for (const name of EVENTS) source.addEventListener(name, onEvent)
    return () => {
      closed = true
      source.close()
    }
  }, [])

  // The cards closed here stay in their place among the pending ones (a replayed request does not bring one back).
  const waiting = useMemo(() => [...pending.values()].filter((item) => !closedHere.has(item.approval_id)), [pending, closedHere])
  const all = useMemo(
    () => [...waiting, ...[...closedHere.values()].map((kept) => kept.item)].sort((a, b) => a.expires_at.localeCompare(b.expires_at)),
    [waiting, closedHere]
  )
  const mineOnly = useMemo(
    () => all.filter((item) => closedHere.has(item.approval_id) || assigned?.has(item.approval_id) === true),
    [all, assigned, closedHere]
  )
  const forget = (id: string) => setPending((current) => {
    const next = new Map(current)
    next.delete(id)
    return next
  })
  const items = only !== undefined ? all.filter((item) => item.approval_id === only) : view === "mine" ? mineOnly : all

  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title" tabIndex={-1}>Approvals</h1>
      <p class="muted" role="status">
        {connection === "live" ? "Live: new and decided approvals appear here by themselves." : connection === "reconnecting" ? "Reconnecting to the live stream…" : "Connecting…"}
      </p>
      <nav class="views" aria-label="Approvals views">
        <a href="/console/approvals" aria-current={view === "pending" ? "page" : undefined} onClick={(event) => {
          event.preventDefault()
          setQuery({ view: undefined, approval: undefined })
        }}>
          Pending{loaded ? ` (${waiting.length})` : ""}
        </a>
        <a href="/console/approvals?view=mine" aria-current={view === "mine" ? "page" : undefined} onClick={(event) => {
          event.preventDefault()
          setQuery({ view: "mine", approval: undefined })
        }}>
          Assigned to me{assigned !== undefined ? ` (${mineOnly.filter((item) => !closedHere.has(item.approval_id)).length})` : ""}
        </a>
        <a href="/console/approvals?view=history" aria-current={view === "history" ? "page" : undefined} onClick={(event) => {
          event.preventDefault()
          setQuery({ view: "history", approval: undefined })
        }}>
          History
        </a>
      </nav>
      <Notice notice={notice} onClose={() => setNotice(undefined)} />
      {only !== undefined && view !== "history" && <p class="muted only-approval">Showing approval <code>{only}</code> alone.</p>}
      {view === "history" ? <History closedCount={closedCount} /> : !loaded
        ? <p class="muted" aria-busy="true">Loading approvals…</p>
        : items.length === 0
        ? <p class="empty">{only !== undefined
          ? `Approval ${only} is not waiting for a decision: it was decided or expired (see History), or it is not of this organization.`
          : view === "mine" ? "No approval assigned to your reviewer groups is waiting." : "No approval is waiting for a decision."}</p>
        : (
          <ul class="cards" aria-label="Pending approvals">
            {items.map((item) => (
              <ApprovalCard
                key={item.approval_id}
                item={item}
                canDecide={canDecide}
                decider={session.actor}
                assignedToMe={assigned === undefined ? undefined : assigned.has(item.approval_id)}
                closed={closedHere.get(item.approval_id)}
                onDecided={(decision) => {
                  mine.current.add(item.approval_id)
                  setClosedCount((n) => n + 1)
                  forget(item.approval_id)
                  setNotice({ tone: "success", text: `${decision === "approve" ? "Approved" : "Rejected"}: ${item.tool} (${item.action_class}).` })
                }}
                onVoted={(snapshot) => {
                  setPending((current) => new Map(current).set(item.approval_id, { ...item, ...snapshot }))
                  setNotice({
                    tone: "success",
                    text: `Your approval is recorded: ${item.tool} (${item.action_class}) needs ${snapshot.approvals_remaining ?? 1} more from someone else.`
                  })
                }}
                onGone={(refusal) => {
                  // Its closing event is said in the card, not at the top of the page.
                  mine.current.add(item.approval_id)
                  setClosedCount((n) => n + 1)
                  forget(item.approval_id)
                  setClosedHere((current) => new Map(current).set(item.approval_id, { item, refusal }))
                }}
                onDismiss={() =>
                  setClosedHere((current) => {
                    const next = new Map(current)
                    next.delete(item.approval_id)
                    return next
                  })}
              />
            ))}
          </ul>
        )}
      {canDecide && <OwnAddress />}
    </section>
  )
}

const ApprovalCard = (
  { item, canDecide, decider, assignedToMe, closed, onDecided, onVoted, onGone, onDismiss }: {
    item: Approval
    canDecide: boolean
    /** Who this console's decisions are recorded as (`console:<person>`). */
    decider: string
    /** Whether the approval is assigned to this person (`undefined`: not known yet). */
    assignedToMe: boolean | undefined
    /** Closed elsewhere before this console's decision: the refusal replaces Approve and Reject. */
    closed: ClosedHere | undefined
    onDecided: (decision: "approve" | "reject") => void
    /** A vote that left the approval pending (it needs more approvals). */
    onVoted: (snapshot: Partial<Approval>) => void
    onGone: (refusal: RefusalValue) => void
    onDismiss: () => void
  }
) => {
  const now = useNow()
  const decide = useMutation(decideAtom)
  const [reason, setReason] = useState("")
  const [args, setArgs] = useState(() => JSON.stringify(item.arguments, null, 2))
  const [response, setResponse] = useState("")
  const [context, setContext] = useState<Context | undefined>(undefined)
  /** The latest refusal of this card's Approve or Reject, shown under its buttons. */
  const [refusal, setRefusal] = useState<RefusalValue | undefined>(undefined)
  useEffect(() => {
    let alive = true
    void runMutation(contextAtom, { params: { approval_id: item.approval_id } }).then((exit) => {
      if (alive && Exit.isSuccess(exit)) setContext(exit.value)
    })
    return () => {
      alive = false
    }
  }, [item.approval_id])
  const left = Date.parse(item.deadline_at) - now
  const titleId = `approval-${item.approval_id}`
  const submit = async (decision: "approve" | "reject") => {
    const given = reason.trim()
    const edit = editPayload(decision, item.arguments, args, response)
    const what = `${decision === "approve" ? "Approve" : "Reject"} of ${item.tool} (${item.action_class}, approval ${item.approval_id})`
    setRefusal(undefined)
    if (typeof edit === "string") return setRefusal({ what, why: `Nothing was sent: ${edit}` })
    const exit = await decide.run({
      params: { approval_id: item.approval_id },
      payload: given === "" ? { decision, ...edit } : { decision, reason: given, ...edit }
    })
    if (Exit.isSuccess(exit)) {
      if (exit.value.status !== "pending") return onDecided(decision)
      setReason("")
      return onVoted(exit.value)
    }
    const problem = problemOf(exit.cause)
    if (problem.code === "ALREADY_VOTED") {
      return setRefusal({ what, why: "You have already voted on this approval (with this or another of your keys); it waits for someone else." })
    }
    if (problem.code === "NOT_ASSIGNED") {
      const group = String(problem.error?.assigned_group ?? item.assigned_group)
      return setRefusal({ what, why: `It is assigned to the reviewer group ${group}: only its members and their delegates decide it.` })
    }
    if (problem.code === "INVALID_TRANSITION" || problem.code === "NOT_FOUND") {
      const now = problem.code === "NOT_FOUND" ? " and is no longer found" : problem.error?.status_now ? `: it is ${String(problem.error.status_now)} now` : ""
      return onGone({ what, why: `It was closed elsewhere meanwhile${now}; nothing was changed.` })
    }
    setRefusal(refusalOf(what, problem))
  }
  return (
    <li class="card" aria-labelledby={titleId}>
      <h2 id={titleId}>{item.tool} <span class="muted">· {item.action_class}</span></h2>
      <dl class="facts">
        <div>
          <dt>Task</dt>
          <dd>{item.task_id === null ? "none" : context === undefined ? "…" : context.task_name ?? "(deleted task)"}</dd>
        </div>
        <div><dt>Tool</dt><dd>{item.tool}</dd></div>
        <RequiredBy item={item} />
        <Assignment item={item} />
        <Chain item={item} />
        <div>
          <dt>{item.escalation === "pending" ? "Escalates in" : "Expires in"}</dt>
          <dd class="countdown" aria-live="off">
            {closed !== undefined ? "never: it is closed" : <time dateTime={item.deadline_at}>{left > 0 ? formatDuration(left) : "now"}</time>}
          </dd>
        </div>
        <div>
          <dt>Escalation</dt>
          <dd>{item.escalation === "none" ? "none" : item.escalation === "pending" ? "at the deadline, with more review time" : "escalated"}</dd>
        </div>
        <div><dt>If nobody decides</dt><dd>{item.timeout_action} (at <Time iso={item.expires_at} />)</dd></div>
        <div><dt>Requested</dt><dd><Time iso={item.requested_at} /></dd></div>
      </dl>
      <h3>Arguments</h3>
      <Json value={item.arguments} label={`Arguments of ${item.tool}`} />
      <Votes item={item} />
      <EarlierSteps context={context} />
      {closed !== undefined && (
        <Refusal id={`refusal-${item.approval_id}`} refusal={closed.refusal} onDismiss={onDismiss}>
          {closed.event && <p class="closed-by">{closing(closed.event)}</p>}
        </Refusal>
      )}
      {closed === undefined && canDecide && hasVoted(item, decider) && (
        <p class="notice info voted">You voted on this approval. It waits for {item.approvals_remaining ?? 1} more approval{(item.approvals_remaining ?? 1) === 1 ? "" : "s"} from someone else.</p>
      )}
      {closed === undefined && canDecide && !hasVoted(item, decider) && item.assigned_group !== undefined && assignedToMe === false && (
        <p class="muted not-assigned">Only members of {item.assigned_group} (or their delegates) decide this approval.</p>
      )}
      {closed === undefined && canDecide && !hasVoted(item, decider) && (item.assigned_group === undefined || assignedToMe !== false) && (
        <>
          <ReasonField id={`reason-${item.approval_id}`} value={reason} onInput={setReason} disabled={decide.busy} />
          <EditFields
            id={`edit-${item.approval_id}`}
            args={args}
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
          <Refusal id={`refusal-${item.approval_id}`} refusal={refusal} onDismiss={() => setRefusal(undefined)} />
        </>
      )}
    </li>
  )
}
