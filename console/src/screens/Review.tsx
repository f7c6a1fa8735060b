/**
 * "Review": the queue of corrections, pending first, one at a time, with
 * the run's input and a structural diff of the original answer and the
 * correction. Keyboard-first: the shortcut table below drives both the key
 * handler and the cheatsheet.
 */
import { Exit } from "effect"
import { useEffect, useMemo, useRef, useState } from "preact/hooks"
import type { ConsoleSession } from "../../../src/api/Console.ts"
import type { FeedbackItem, FeedbackStatus } from "../../../src/api/Feedback.ts"
import { problemOf, SvcApi } from "../api.ts"
import { useAtomValue, useMutation } from "../atoms.ts"
import { jsonDiff } from "../diff.ts"
import { setQuery, useLocation } from "../router.ts"
import { has } from "../session.ts"
import { shortId, taskLabels } from "../task-labels.ts"
import { Json, Loaded, Notice, type NoticeValue, Refusal, refusalOf, type RefusalValue, Time, useModal } from "../ui.tsx"

const stageAtom = SvcApi.mutation("feedback", "stage")
const rejectAtom = SvcApi.mutation("feedback", "reject")
const tasksAtom = SvcApi.query("tasks", "list", { query: { limit: 100 }, timeToLive: "60 seconds" })

const statuses = ["pending", "staged", "rejected", "promoted", "all"] as const
type StatusFilter = typeof statuses[number]

const statusOrder: Record<FeedbackStatus, number> = { pending: 0, staged: 1, rejected: 2, promoted: 3, recorded: 4 }

interface Shortcut {
  readonly key: string
  readonly description: string
  readonly run: () => void
}

export const Review = ({ session }: { session: ConsoleSession }) => {
  const { query } = useLocation()
  const taskId = query.get("task") ?? undefined
  const status = (statuses as ReadonlyArray<string>).includes(query.get("status") ?? "") ? query.get("status") as StatusFilter : "pending"
  const listAtom = useMemo(() =>
    SvcApi.query("feedback", "list", {
      query: {
        ...(taskId ? { task_id: taskId } : {}),
        ...(status === "all" ? {} : { status }),
        limit: 100
      },
      reactivityKeys: ["feedback"]
    }), [taskId, status])
  const list = useAtomValue(listAtom)
  const tasks = useAtomValue(tasksAtom)
  const taskNames = taskLabels(tasks._tag === "Success" ? tasks.value.tasks : [])
  const canDecide = has(session.scopes, "feedback.review") || has(session.scopes, "feedback.write")

  const [gone, setGone] = useState<ReadonlySet<string>>(new Set())
  /**
   * A correction whose Stage or Reject was refused, as it is now: it stays in
   * the queue, selected, with the refusal in its card, until the person moves on.
   */
  const [held, setHeld] = useState<{ readonly before: FeedbackItem; readonly item: FeedbackItem; readonly refusal: RefusalValue } | undefined>(undefined)
  const queue = useMemo(() => {
    if (list._tag !== "Success") return []
    // The held one keeps its place (as it was when refused), shown as it is now.
    const items = list.value.feedback
      .filter((item) => item.status !== "recorded" && (!gone.has(item.id) || item.id === held?.item.id))
      .map((item) => (item.id === held?.item.id ? held.before : item))
    if (held && !items.some((item) => item.id === held.item.id)) items.push(held.before)
    return items.sort((a, b) => statusOrder[a.status] - statusOrder[b.status]).map((item) => (item.id === held?.item.id ? held.item : item))
  }, [list, gone, held])
  const [selectedId, setSelectedIdNow] = useState<string | undefined>(undefined)
  const setSelectedId = (id: string | undefined) => {
    if (id !== held?.item.id) setHeld(undefined)
    setSelectedIdNow(id)
  }
  const index = Math.max(0, queue.findIndex((item) => item.id === selectedId))
  const selected: FeedbackItem | undefined = queue[index]
  const [notice, setNotice] = useState<NoticeValue | undefined>(undefined)
  const [cheatsheet, setCheatsheet] = useState(false)
  const stage = useMutation(stageAtom)
  const reject = useMutation(rejectAtom)
  const busy = stage.busy || reject.busy

  const move = (delta: number) => {
    const next = queue[Math.min(queue.length - 1, Math.max(0, index + delta))]
    if (next) setSelectedId(next.id)
  }

  const decide = async (decision: "stage" | "reject") => {
    if (!selected || busy || !canDecide || selected.status !== "pending") return
    const item = selected
    const following = queue[index + 1] ?? queue[index - 1]
    const mutation = decision === "stage" ? stage : reject
    setHeld(undefined)
    const exit = await mutation.run({ params: { feedback_id: item.id }, reactivityKeys: ["feedback"] })
    if (Exit.isSuccess(exit)) {
      setNotice({ tone: "success", text: decision === "stage" ? "Staged. It will go into the next promotion." : "Rejected." })
      if (status === "pending") setGone((current) => new Set(current).add(item.id))
      setSelectedId(following?.id)
      return
    }
    const problem = problemOf(exit.cause)
    const what = `${decision === "stage" ? "Stage" : "Reject"} of correction ${item.id} (${taskNames.get(item.task_id) ?? "task"})`
    setNotice(undefined)
    if (problem.code === "INVALID_TRANSITION" || problem.code === "NOT_FOUND") {
      // Decided (or deleted) elsewhere: said here, and it leaves the queue once the person moves on.
      const now = problem.error?.status_now
      setGone((current) => new Set(current).add(item.id))
      setHeld({
        before: item,
        item: typeof now === "string" && now in statusOrder ? { ...item, status: now as FeedbackStatus } : item,
        refusal: {
          what,
          why: problem.code === "NOT_FOUND"
            ? "This correction no longer exists; it leaves the queue when you move on."
            : `Someone decided this correction meanwhile${now ? ` (it is ${String(now)} now)` : ""}; nothing was changed, and it leaves the queue when you move on.`
        }
      })
      return
    }
    setHeld({ before: item, item, refusal: refusalOf(what, problem) })
  }

  const shortcuts: ReadonlyArray<Shortcut> = [
    ...(canDecide
      ? [
        { key: "s", description: "Stage the selected correction", run: () => void decide("stage") },
        { key: "r", description: "Reject the selected correction", run: () => void decide("reject") }
      ]
      : []),
    { key: "j", description: "Next correction", run: () => move(1) },
    { key: "k", description: "Previous correction", run: () => move(-1) },
    { key: "?", description: "Show or hide this list of keys", run: () => setCheatsheet((open) => !open) }
  ]
  const latest = useRef(shortcuts)
  latest.current = shortcuts
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (event.ctrlKey || event.metaKey || event.altKey) return
      const target = event.target as HTMLElement | null
      if (target && (target.isContentEditable || ["INPUT", "SELECT", "TEXTAREA"].includes(target.tagName))) return
      if (document.querySelector("dialog[open]") && event.key !== "?") return
      const shortcut = latest.current.find((candidate) => candidate.key === event.key)
      if (!shortcut) return
      event.preventDefault()
      shortcut.run()
    }
    document.addEventListener("keydown", onKey)
    return () => document.removeEventListener("keydown", onKey)
  }, [])

  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title" tabIndex={-1}>Review</h1>
      <form class="filters" aria-label="Filters" onSubmit={(event) => event.preventDefault()}>
        <label>
          Task
          <select value={taskId ?? ""} onChange={(event) => setQuery({ task: event.currentTarget.value })}>
            <option value="">All tasks</option>
            {[...taskNames].map(([id, name]) => <option key={id} value={id}>{name}</option>)}
          </select>
        </label>
        <label>
          Status
          <select value={status} onChange={(event) => setQuery({ status: event.currentTarget.value === "pending" ? undefined : event.currentTarget.value })}>
            {statuses.map((value) => <option key={value} value={value}>{value === "all" ? "All (pending first)" : value}</option>)}
          </select>
        </label>
        <button type="button" class="link" onClick={() => setCheatsheet(true)} aria-keyshortcuts="?">Keyboard shortcuts</button>
      </form>
      <Notice notice={notice} onClose={() => setNotice(undefined)} />
      <Loaded result={list} what="the queue">
        {() =>
          queue.length === 0
            ? <p class="empty">No corrections here{status === "pending" ? ": the queue is empty." : "."}</p>
            : (
              <div class="review">
                <ol class="queue" aria-label="Corrections">
                  {queue.map((item) => (
                    <li key={item.id}>
                      <button
                        type="button"
                        class="queue-item"
                        aria-current={item.id === selected?.id ? "true" : undefined}
                        onClick={() => setSelectedId(item.id)}
                      >
                        <span class={`badge ${item.status}`}>{item.status}</span>
                        <span>{taskNames.get(item.task_id) ?? "task"}</span>
                        <span class="muted">score {item.score}</span>
                        <span class="muted queue-when">
                          <Time iso={item.created_at} /> · <span class="id">{shortId(item.id)}</span>
                        </span>
                        {item.redaction_warning && <span class="badge warning">redacted</span>}
                      </button>
                    </li>
                  ))}
                </ol>
                {selected && (
                  <Detail
                    key={selected.id}
                    item={selected}
                    taskName={taskNames.get(selected.task_id)}
                    position={`${index + 1} of ${queue.length}`}
                    canDecide={canDecide}
                    busy={busy}
                    onDecide={decide}
                    refusal={held?.item.id === selected.id ? held.refusal : undefined}
                    onDismiss={() => setHeld(undefined)}
                  />
                )}
              </div>
            )}
      </Loaded>
      <Cheatsheet open={cheatsheet} shortcuts={shortcuts} onClose={() => setCheatsheet(false)} />
    </section>
  )
}

const Detail = (
  { item, taskName, position, canDecide, busy, onDecide, refusal, onDismiss }: {
    item: FeedbackItem
    taskName: string | undefined
    position: string
    canDecide: boolean
    busy: boolean
    onDecide: (decision: "stage" | "reject") => void
    /** The latest refusal of this correction's Stage or Reject, said under its buttons. */
    refusal: RefusalValue | undefined
    onDismiss: () => void
  }
) => {
  const runAtom = useMemo(() => SvcApi.query("tasks", "getRun", { params: { trace_id: item.inference_log_id } }), [item.inference_log_id])
  const run = useAtomValue(runAtom)
  return (
    <article class="detail" aria-label="Selected correction">
      <header class="detail-head">
        <h2>Correction {position}</h2>
        <dl class="facts">
          <div><dt>Task</dt><dd>{taskName ?? item.task_id}<code class="key-id">{item.task_id}</code></dd></div>
          <div><dt>Correction</dt><dd><code class="id">{item.id}</code></dd></div>
          <div><dt>Score</dt><dd>{item.score === 1 ? "1 (right)" : item.score === -1 ? "-1 (wrong)" : "0 (neutral)"}</dd></div>
          <div><dt>Status</dt><dd>{item.status}</dd></div>
          <div><dt>Submitted</dt><dd><Time iso={item.created_at} /></dd></div>
        </dl>
      </header>
      {item.redaction_warning && (
        <div class="notice warning" role="note" aria-label="Redaction warning">
          <p><strong>Redacted:</strong> {item.redaction_warning.message}</p>
          <p>Fields changed: {item.redaction_warning.fields.map((field) => <code key={field}>{field}</code>)}</p>
        </div>
      )}
      <Loaded result={run} what="the run">
        {(value) => {
          const changes = jsonDiff(value.answer, item.correction)
          return (
            <>
              <h3>Input</h3>
              <Json value={value.input} label="Run input" />
              <div class="side-by-side">
                <div>
                  <h3>Original answer</h3>
                  <Json value={value.answer} label="Original answer" />
                </div>
                <div>
                  <h3>Correction</h3>
                  <Json value={item.correction} label="Correction" />
                </div>
              </div>
              <h3>Changes</h3>
              {changes.length === 0
                ? <p class="muted">The correction equals the original answer.</p>
                : (
                  <div class="table-wrap">
                  <table class="changes">
                    <caption class="sr-only">Changes from the original answer to the correction, by JSON path</caption>
                    <thead><tr><th scope="col">Path</th><th scope="col">Change</th><th scope="col">Original</th><th scope="col">Correction</th></tr></thead>
                    <tbody>
                      {changes.map((change) => (
                        <tr key={change.path} class={change.kind}>
                          <td data-label="Path"><code>{change.path}</code></td>
                          <td data-label="Change">{change.kind}</td>
                          <td data-label="Original">{"before" in change && <code>{JSON.stringify(change.before)}</code>}</td>
                          <td data-label="Correction">{"after" in change && <code>{JSON.stringify(change.after)}</code>}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                  </div>
                )}
            </>
          )
        }}
      </Loaded>
      {canDecide && item.status === "pending" && (
        <div class="actions sticky">
          <button type="button" class="primary" disabled={busy} aria-keyshortcuts="s" onClick={() => onDecide("stage")}>Stage</button>
          <button type="button" class="danger" disabled={busy} aria-keyshortcuts="r" onClick={() => onDecide("reject")}>Reject</button>
        </div>
      )}
      <Refusal id={`refusal-${item.id}`} refusal={refusal} onDismiss={onDismiss} />
    </article>
  )
}

const Cheatsheet = ({ open, shortcuts, onClose }: { open: boolean; shortcuts: ReadonlyArray<Shortcut>; onClose: () => void }) => {
  const ref = useModal(open)
  return (
    <dialog ref={ref} aria-labelledby="keys-title" onCancel={(event) => {
      event.preventDefault()
      onClose()
    }}>
      <h2 id="keys-title">Keyboard shortcuts</h2>
      <table>
        <tbody>
          {shortcuts.map((shortcut) => (
            <tr key={shortcut.key}><th scope="row"><kbd>{shortcut.key}</kbd></th><td>{shortcut.description}</td></tr>
          ))}
        </tbody>
      </table>
      <div class="actions"><button type="button" onClick={onClose}>Close</button></div>
    </dialog>
  )
}
