/**
 * "Promote": per task, the preview of the next dataset version (its base
 * and the staged corrections) and the button that creates it. When the
 * dataset or the staged set changed since the preview (409), the preview is
 * reloaded, the difference shown, and the person confirms again. Below it,
 * the task's versions, each downloadable as JSON Lines.
 */
import { Exit } from "effect"
import { useMemo, useState } from "preact/hooks"
import type { PromotePreview as PromotePreviewSchema } from "../../../src/api/Feedback.ts"

type PromotePreview = typeof PromotePreviewSchema.Type
import { problemOf, SvcApi } from "../api.ts"
import { refresh, runMutation, useAtomValue, useMutation } from "../atoms.ts"
import { setQuery, useLocation } from "../router.ts"
import { taskLabels } from "../task-labels.ts"
import { Json, Loaded, Notice, type NoticeValue, Refusal, refusalOf, type RefusalValue, Time } from "../ui.tsx"

const tasksAtom = SvcApi.query("tasks", "list", { query: { limit: 100 }, timeToLive: "60 seconds" })
const promoteAtom = SvcApi.mutation("feedback", "promote")
const datasetAtom = SvcApi.mutation("datasets", "get")

/** One version's summary (its number and size), without its examples' pages. */
const versionAtom = (datasetId: string) =>
  SvcApi.query("datasets", "get", { params: { dataset_id: datasetId }, query: { limit: 1 }, reactivityKeys: ["datasets"] })

const useVersion = (datasetId: string) => {
  const atom = useMemo(() => versionAtom(datasetId), [datasetId])
  const result = useAtomValue(atom)
  return { atom, result, summary: result._tag === "Success" ? result.value : undefined }
}

export const Promote = () => {
  const { query } = useLocation()
  const tasks = useAtomValue(tasksAtom)
  const taskId = query.get("task") ?? (tasks._tag === "Success" ? tasks.value.tasks[0]?.id : undefined)
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title" tabIndex={-1}>Promote</h1>
      <Loaded result={tasks} what="tasks">
        {(value) =>
          value.tasks.length === 0
            ? <p class="empty">No tasks yet.</p>
            : (
              <>
                <form class="filters" aria-label="Task" onSubmit={(event) => event.preventDefault()}>
                  <label>
                    Task
                    <select value={taskId ?? ""} onChange={(event) => setQuery({ task: event.currentTarget.value })}>
                      {(() => {
                        const labels = taskLabels(value.tasks)
                        return value.tasks.map((task) => <option key={task.id} value={task.id}>{labels.get(task.id)}</option>)
                      })()}
                    </select>
                  </label>
                </form>
                {taskId && <TaskPromotion key={taskId} taskId={taskId} taskName={taskLabels(value.tasks).get(taskId) ?? taskId} />}
                {taskId && <Versions key={`versions-${taskId}`} taskId={taskId} />}
              </>
            )}
      </Loaded>
    </section>
  )
}

const describeChange = (before: PromotePreview, after: PromotePreview, from: number | undefined, to: number | undefined) => {
  const parts: Array<string> = []
  if (before.base_dataset_id !== after.base_dataset_id) {
    parts.push(`the dataset moved on${from !== undefined && to !== undefined ? ` from version ${from} to version ${to}` : ""}`)
  }
  const old = new Set(before.staged.map((item) => item.id))
  const now = new Set(after.staged.map((item) => item.id))
  const added = after.staged.filter((item) => !old.has(item.id)).length
  const removed = before.staged.filter((item) => !now.has(item.id)).length
  if (added > 0) parts.push(`${added} staged correction${added === 1 ? "" : "s"} added`)
  if (removed > 0) parts.push(`${removed} staged correction${removed === 1 ? "" : "s"} no longer staged`)
  return parts.length === 0 ? "the staged set changed" : parts.join("; ")
}

const TaskPromotion = ({ taskId, taskName }: { taskId: string; taskName: string }) => {
  const previewAtom = useMemo(() => SvcApi.query("feedback", "promotePreview", { params: { task_id: taskId }, query: { limit: 100 }, reactivityKeys: ["feedback", "datasets"] }), [taskId])
  const preview = useAtomValue(previewAtom)
  const promote = useMutation(promoteAtom)
  const [notice, setNotice] = useState<NoticeValue | undefined>(undefined)
  /** The latest refusal of Promote, said under its button. */
  const [refusal, setRefusal] = useState<RefusalValue | undefined>(undefined)
  /** The preview the person saw when a 409 arrived: kept to show what changed. */
  const [seen, setSeen] = useState<PromotePreview | undefined>(undefined)

  const submit = async (current: PromotePreview) => {
    setNotice(undefined)
    setRefusal(undefined)
    const exit = await promote.run({
      params: { task_id: taskId },
      payload: { base_dataset_id: current.base_dataset_id, expected_feedback_revision: current.expected_feedback_revision },
      reactivityKeys: ["datasets", "feedback"]
    })
    if (Exit.isSuccess(exit)) {
      const done = exit.value
      setSeen(undefined)
      const made = await runMutation(datasetAtom, { params: { dataset_id: done.dataset_id }, query: { limit: 1 } })
      const count = Exit.isSuccess(made) ? made.value.example_count : undefined
      setNotice({
        tone: "success",
        text: (
          <>
            Promoted {done.promoted_count} correction{done.promoted_count === 1 ? "" : "s"}: dataset version {done.version} now has{" "}
            {count ?? "its"} example{count === 1 ? "" : "s"}. <Download datasetId={done.dataset_id} version={done.version} />
          </>
        )
      })
      return
    }
    const problem = problemOf(exit.cause)
    if (problem.code === "DATASET_BASE_CHANGED" || problem.code === "FEEDBACK_CHANGED" || problem.code === "NOTHING_STAGED") {
      setSeen(current)
      refresh(previewAtom)
      setRefusal({
        what: `Promote of ${taskName}`,
        why: problem.code === "NOTHING_STAGED"
          ? "Nothing is staged for this task any more; nothing was promoted."
          : "The preview changed since you loaded it; nothing was promoted. Check the new preview and press Promote again to confirm."
      })
      return
    }
    setRefusal(refusalOf(`Promote of ${taskName}`, problem))
  }

  return (
    <>
      <Loaded result={preview} what="the preview">
        {(value, waiting) => {
          const changed = seen !== undefined && !waiting && (seen.expected_feedback_revision !== value.expected_feedback_revision || seen.base_dataset_id !== value.base_dataset_id)
          return (
            <div class="promotion">
              {changed && <WhatChanged before={seen!} after={value} />}
              <dl class="facts">
                <div><dt>Base version</dt><dd><BaseVersion datasetId={value.base_dataset_id} /></dd></div>
                <div><dt>Staged corrections</dt><dd>{value.staged_count}</dd></div>
              </dl>
              <div class="actions">
                <button
                  type="button"
                  class="primary"
                  disabled={promote.busy || waiting || value.staged.length === 0}
                  aria-describedby={value.staged.length === 0 ? "nothing-staged" : undefined}
                  onClick={() => submit(value)}
                >
                  Promote
                </button>
                {value.staged.length === 0 && <span id="nothing-staged" class="muted">Nothing staged for this task: stage corrections in Review first.</span>}
              </div>
              <Notice notice={notice} onClose={() => setNotice(undefined)} />
              <Refusal id="promote-refusal" refusal={refusal} onDismiss={() => setRefusal(undefined)} />
              {value.staged.length > 0 && (
                <ol class="staged" aria-label="Staged corrections">
                  {value.staged.map((item) => <StagedItem key={item.id} traceId={item.inference_log_id} correction={item.correction} />)}
                </ol>
              )}
              {value.next_cursor !== null && (
                <p class="muted">Showing the first {value.staged.length} of {value.staged_count} staged corrections; Promote takes all of them.</p>
              )}
            </div>
          )
        }}
      </Loaded>
    </>
  )
}

/**
 * A version's export (`GET /v1/datasets/:id/export`) as a plain link: the
 * session cookie goes with it (same origin, a read), and the browser saves
 * the file as it arrives (under the name the answer gives) instead of
 * holding it in the page.
 */
const Download = ({ datasetId, version }: { datasetId: string; version: number }) => (
  <a href={`/v1/datasets/${datasetId}/export`} download type="application/jsonl">
    Download version {version} as JSON Lines
  </a>
)

/** The task's dataset versions, newest first, each with its download. */
const Versions = ({ taskId }: { taskId: string }) => {
  const atom = useMemo(
    () => SvcApi.query("datasets", "listForTask", { params: { task_id: taskId }, query: { limit: 100 }, reactivityKeys: ["datasets"] }),
    [taskId]
  )
  const versions = useAtomValue(atom)
  return (
    <section aria-labelledby="versions-title">
      <h2 id="versions-title">Dataset versions</h2>
      <Loaded result={versions} what="the dataset versions">
        {(value) => (
          <>
            <div class="table-wrap">
              <table aria-label="Dataset versions">
                <thead>
                  <tr>
                    <th scope="col">Version</th>
                    <th scope="col">Examples</th>
                    <th scope="col">Created</th>
                    <th scope="col">JSON Lines</th>
                  </tr>
                </thead>
                <tbody>
                  {[...value.datasets].reverse().map((dataset) => (
                    <tr key={dataset.id}>
                      <td data-label="Version">{dataset.version}</td>
                      <td data-label="Examples">{dataset.example_count}</td>
                      <td data-label="Created"><Time iso={dataset.created_at} /></td>
                      <td data-label="JSON Lines"><Download datasetId={dataset.id} version={dataset.version} /></td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            {value.next_cursor !== null && <p class="muted">Showing the first {value.datasets.length} versions.</p>}
          </>
        )}
      </Loaded>
    </section>
  )
}

const BaseVersion = ({ datasetId }: { datasetId: string }) => {
  const { summary } = useVersion(datasetId)
  return <>{summary ? `version ${summary.version} (${summary.example_count} examples)` : datasetId}</>
}

/** Said once the dataset versions it names are loaded and fresh. */
const WhatChanged = ({ before, after }: { before: PromotePreview; after: PromotePreview }) => {
  const from = useVersion(before.base_dataset_id)
  const to = useVersion(after.base_dataset_id)
  const fresh = [from.result, to.result].every((result) => result._tag === "Success" && !result.waiting)
  if (!fresh && before.base_dataset_id !== after.base_dataset_id) return null
  return (
    <p class="notice warning" role="alert" aria-label="What changed">
      What changed: {describeChange(before, after, from.summary?.version, to.summary?.version)}.
    </p>
  )
}

const StagedItem = ({ traceId, correction }: { traceId: string; correction: unknown }) => {
  const runAtom = useMemo(() => SvcApi.query("tasks", "getRun", { params: { trace_id: traceId } }), [traceId])
  const run = useAtomValue(runAtom)
  return (
    <li class="side-by-side">
      <div>
        <h3>Input</h3>
        {run._tag === "Success" ? <Json value={run.value.input} label="Input" /> : <p class="muted">…</p>}
      </div>
      <div>
        <h3>Corrected answer</h3>
        <Json value={correction} label="Corrected answer" />
      </div>
    </li>
  )
}
