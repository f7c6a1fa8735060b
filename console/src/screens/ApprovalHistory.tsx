/**
 * "History" of the approvals screen: closed approvals, the latest first,
 * each with its whole record: the outcome, every vote (who acted, for whom,
 * when, why), the rule that required it, its reviewer group and escalation
 * chain, and the edited arguments or the answer sent instead of the tool.
 */
import { Exit } from "effect"
import { useEffect, useState } from "preact/hooks"
import type { ApprovalHistoryItem } from "../../../src/api/Approvals.ts"
import { problemOf, SvcApi } from "../api.ts"
import { Decider, StandsFor } from "../approval-parts.tsx"
import { runMutation } from "../atoms.ts"
import { describeProblem, Json, Time } from "../ui.tsx"

type HistoryItem = typeof ApprovalHistoryItem.Type

const historyAtom = SvcApi.mutation("approvals", "history")

/** Closed approvals, the latest first: who decided, when and why. */
export const History = ({ closedCount }: { closedCount: number }) => {
  const [items, setItems] = useState<ReadonlyArray<HistoryItem> | undefined>(undefined)
  const [next, setNext] = useState<string | null>(null)
  const [error, setError] = useState<string | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const load = async (cursor?: string) => {
    setBusy(true)
    const exit = await runMutation(historyAtom, { query: cursor === undefined ? { limit: 50 } : { limit: 50, cursor } })
    setBusy(false)
    if (Exit.isFailure(exit)) return setError(`Could not load the history: ${describeProblem(problemOf(exit.cause))}`)
    setError(undefined)
    setItems((current) => cursor === undefined ? exit.value.approvals : [...(current ?? []), ...exit.value.approvals])
    setNext(exit.value.next_cursor)
  }
  useEffect(() => {
    void load()
  }, [closedCount])
  if (error !== undefined) return <p class="notice error" role="alert">{error}</p>
  if (items === undefined) return <p class="muted" aria-busy="true">Loading the history…</p>
  if (items.length === 0) return <p class="empty">No approval has been decided or has expired yet.</p>
  return (
    <>
      <div class="table-wrap">
        <table aria-label="Decided and expired approvals">
          <thead>
            <tr>
              <th scope="col">Tool</th>
              <th scope="col">Task</th>
              <th scope="col">Outcome</th>
              <th scope="col">Who</th>
              <th scope="col">When</th>
              <th scope="col">Why</th>
              <th scope="col">Record</th>
            </tr>
          </thead>
          <tbody>
            {items.map((item) => (
              <tr key={item.approval_id}>
                <td data-label="Tool">{item.tool} <span class="muted">· {item.action_class}</span><br /><span class="id">step {item.step_id}</span></td>
                <td data-label="Task">{item.task_name ?? <span class="muted">none</span>}</td>
                <td data-label="Outcome">
                  <span class={`badge ${item.status === "approved" ? "delivered" : item.status === "rejected" ? "rejected" : "warning"}`}>
                    {item.status}
                  </span>
                  {item.status === "expired" && <span class="muted"> · {item.timeout_action === "allow" ? "allowed" : "rejected"} by timeout</span>}
                </td>
                <td data-label="Who">{item.status === "expired" && (item.votes ?? []).length === 0 ? <span class="muted">nobody</span> : <Who item={item} />}</td>
                <td data-label="When"><Time iso={item.status === "expired" ? item.expires_at : item.decided_at} /></td>
                <td class="why" data-label="Why">{item.decision_reason ?? <span class="muted">—</span>}</td>
                <td class="record" data-label="Record"><Record item={item} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {next !== null && (
        <div class="actions">
          <button type="button" disabled={busy} onClick={() => load(next)}>Show older</button>
        </div>
      )}
    </>
  )
}

/**
 * Who decided: the decider (and whom they stand for); for an approval that
 * needed several people, every vote in order, with whom it counted for,
 * when and why.
 */
const Who = ({ item }: { item: HistoryItem }) => {
  const votes = item.votes ?? []
  if (item.quorum === undefined || votes.length === 0) {
    return <><Decider decidedBy={item.decided_by} names={item.key_names} /><StandsFor person={item.decided_by_person} decidedFor={item.decided_for} names={item.key_names} /></>
  }
  return (
    <ol class="vote-list" aria-label={`Votes on ${item.tool}`}>
      {votes.map((vote) => (
        <li key={vote.decided_by}>
          <span class={`badge ${vote.decision === "approve" ? "delivered" : "rejected"}`}>{vote.decision === "approve" ? "approved" : "rejected"}</span>{" "}
          <Decider decidedBy={vote.decided_by} names={item.key_names} />
          <StandsFor person={vote.decided_by_person} decidedFor={vote.decided_for} names={item.key_names} />{" "}
          <span class="muted">at <Time iso={vote.decided_at} /></span>
          {vote.reason !== undefined && <span class="vote-reason">: “{vote.reason}”</span>}
        </li>
      ))}
    </ol>
  )
}

/** What required it and where it went, and what the tool ran with or what the agent was answered instead. */
const Record = ({ item }: { item: HistoryItem }) => {
  const chain = item.escalation_chain
  const level = item.escalation_level ?? 0
  return (
    <ul class="record-facts">
      <li>Required by {item.rule === undefined ? "the action class's settings" : <>rule <strong>{item.rule}</strong></>}</li>
      {item.quorum !== undefined && <li>{item.quorum} approvals needed</li>}
      {item.assigned_group !== undefined && <li>Assigned to <span class="badge">{item.assigned_group}</span></li>}
      {chain !== undefined && <li>Escalation chain {chain.join(" → ")}{level > 0 ? ` (reached ${chain[level - 1]})` : " (not reached)"}</li>}
      {item.approved_arguments !== undefined && (
        <li>
          Approved with edited arguments (changed: {(item.arguments_changed ?? []).join(", ") || "nothing"})
          <details>
            <summary>Arguments the tool ran with</summary>
            <Json value={item.approved_arguments} label={`Approved arguments of ${item.tool}`} />
          </details>
        </li>
      )}
      {item.response !== undefined && (
        <li>Answered the agent instead of running the tool: “{typeof item.response === "string" ? item.response : JSON.stringify(item.response)}”</li>
      )}
    </ul>
  )
}
