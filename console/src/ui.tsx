/** Small pieces every screen uses. */
import type { ComponentChildren } from "preact"
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks"
import type { AsyncResult } from "effect/reactivity"
import { type Problem, problemOf } from "./api.ts"
import { refresh } from "./atoms.ts"
import { sessionAtom } from "./session.ts"

export type Tone = "info" | "success" | "warning" | "error"

export interface NoticeValue {
  readonly tone: Tone
  readonly text: ComponentChildren
}

/** A message about what just happened, read out by screen readers. */
export const Notice = ({ notice, onClose }: { notice: NoticeValue | undefined; onClose?: () => void }) => (
  <div class="notice-slot" role={notice?.tone === "error" ? "alert" : "status"} aria-live="polite">
    {notice && (
      <div class={`notice ${notice.tone}`}>
        <div>{notice.text}</div>
        {onClose && <button type="button" class="link" onClick={onClose}>Dismiss</button>}
      </div>
    )}
  </div>
)

/** Renders a query's result: loading, the API's problem in words, or the value. */
export const Loaded = <A, E>(
  { result, children, what }: { result: AsyncResult.AsyncResult<A, E>; what: string; children: (value: A, waiting: boolean) => ComponentChildren }
) => {
  if (result._tag === "Initial") return <p class="muted" aria-busy="true">Loading {what}…</p>
  if (result._tag === "Failure") {
    const problem = problemOf(result.cause)
    return problem.code === "UNAUTHENTICATED" ? <SessionEnded /> : <ProblemText problem={problem} what={what} />
  }
  return <>{children(result.value, result.waiting)}</>
}

/** The session ended meanwhile (signed out elsewhere, revoked, expired): the whole console says so. */
const SessionEnded = () => {
  useEffect(() => refresh(sessionAtom), [])
  return <p class="muted">Your session has ended.</p>
}

export const ProblemText = ({ problem, what }: { problem: Problem; what: string }) => (
  <p class="notice error" role="alert">
    Could not load {what}: {describeProblem(problem)}
  </p>
)

/** The API's problem in words a person acts on. */
export const describeProblem = (problem: Problem): string => {
  const error = problem.error ?? {}
  switch (problem.code) {
    case "INSUFFICIENT_SCOPE":
      return `your session lacks the ${String(error.required_scope)} scope.`
    case "UNAUTHENTICATED":
      return "you are signed out (the session ended or was revoked). Ask for a new sign-in link."
    case "CROSS_SITE_REQUEST":
      return "the service refused a request that did not come from the console itself."
    case "NOT_FOUND":
      return "it no longer exists (deleted elsewhere?)."
    case "LIMIT_REACHED":
      return `the organization reached a limit (${String(error.limit)} = ${String(error.limit_value)}).`
    case "SERVICE_UNAVAILABLE":
      return "the service cannot reach its database for the moment; try again shortly."
    default:
      return problem.detail ?? problem.title
  }
}

export const formatTime = (iso: string | null | undefined) => {
  if (!iso) return "—"
  const date = new Date(iso)
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" })
}

export const Time = ({ iso }: { iso: string | null | undefined }) =>
  iso ? <time dateTime={iso}>{formatTime(iso)}</time> : <span class="muted">—</span>

export const Json = ({ value, label }: { value: unknown; label: string }) => (
  <pre class="json" tabIndex={0} aria-label={label}>{JSON.stringify(value, null, 2)}</pre>
)

/** The current time, ticking every second while mounted (for countdowns). */
export const useNow = (intervalMs = 1000) => {
  const [now, setNow] = useState(() => Date.now())
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), intervalMs)
    return () => clearInterval(timer)
  }, [intervalMs])
  return now
}

export const formatDuration = (ms: number) => {
  const total = Math.max(0, Math.round(ms / 1000))
  const h = Math.floor(total / 3600)
  const m = Math.floor((total % 3600) / 60)
  const s = total % 60
  if (h > 0) return `${h} h ${m} min`
  if (m > 0) return `${m} min ${s} s`
  return `${s} s`
}

/** Polls `refresh` every `ms` while the page is visible. */
export const useInterval = (refresh: () => void, ms: number) => {
  const saved = useRef(refresh)
  saved.current = refresh
  useEffect(() => {
    const timer = setInterval(() => {
      if (document.visibilityState === "visible") saved.current()
    }, ms)
    return () => clearInterval(timer)
  }, [ms])
}

/**
 * A modal `<dialog>` shown while `open`, in step with the render (a layout
 * effect), so a click right after it closes never meets a stale modal.
 * Escape arrives as the dialog's `cancel` event: the owner decides.
 */
export const useModal = (open: boolean) => {
  const ref = useRef<HTMLDialogElement>(null)
  useLayoutEffect(() => {
    const dialog = ref.current
    if (!dialog) return
    if (open && !dialog.open) dialog.showModal()
    if (!open && dialog.open) dialog.close()
  }, [open])
  return ref
}

/**
 * A confirmation as a modal dialog: focus moves into it, Escape cancels,
 * and focus returns to what opened it.
 */
export const Confirm = (
  { open, title, children, confirmLabel, onConfirm, onCancel, busy, id = "confirm-title" }: {
    open: boolean
    title: string
    children: ComponentChildren
    confirmLabel: string
    onConfirm: () => void
    onCancel: () => void
    busy?: boolean
    /** The title's id: one per confirmation, where a screen has several. */
    id?: string
  }
) => {
  const ref = useModal(open)
  return (
    <dialog ref={ref} aria-labelledby={id} onCancel={(event) => {
      event.preventDefault()
      onCancel()
    }}>
      <h2 id={id}>{title}</h2>
      <div>{children}</div>
      <div class="actions">
        <button type="button" class="danger" disabled={busy} onClick={onConfirm}>{confirmLabel}</button>
        <button type="button" onClick={onCancel}>Cancel</button>
      </div>
    </dialog>
  )
}

/** A secret shown once, with a copy button; it is gone when dismissed. */
export const SecretOnce = ({ label, secret, onDone }: { label: string; secret: string; onDone: () => void }) => {
  const [copied, setCopied] = useState(false)
  const ref = useRef<HTMLDivElement>(null)
  useEffect(() => ref.current?.focus(), [])
  return (
    <div class="secret" role="region" aria-label={label} tabIndex={-1} ref={ref}>
      <p><strong>{label}</strong>: shown only now. Copy it and keep it safe; it cannot be shown again.</p>
      <code class="secret-value" data-secret>{secret}</code>
      <div class="actions">
        <button
          type="button"
          onClick={() =>
            navigator.clipboard.writeText(secret).then(() => setCopied(true), () => setCopied(false))}
        >
          Copy
        </button>
        <button type="button" onClick={onDone}>I have saved it</button>
        <span role="status">{copied ? "Copied." : ""}</span>
      </div>
    </div>
  )
}

/** A refusal said where it happened: what was refused, why (the problem's words) and, when the API names them, the fields. */
export interface RefusalValue {
  /** What was refused, named: "Approve of stripe.refund (approval 0193…)". */
  readonly what: string
  readonly why: string
  readonly issues?: ReadonlyArray<{ readonly field: string; readonly message: string }>
}

/** The problem's own words: its title, and its detail or what to do about it when they say more. */
export const problemWords = (problem: Problem): string => {
  if (problem.code === "LIMIT_REACHED") {
    const error = problem.error ?? {}
    const limit = `${problem.title.replace(/\.$/, "")} (${String(error.limit)} = ${String(error.limit_value)})`
    return problem.detail === undefined || problem.detail === problem.title ? `${limit}.` : `${limit}: ${problem.detail}`
  }
  const said = describeProblem(problem)
  return said === problem.title ? said : `${problem.title.replace(/\.$/, "")}: ${said}`
}

/** The field issues a problem carries (`errors` of INVALID_REQUEST, ARGUMENTS_SHAPE_MISMATCH and others), if any. */
export const problemIssues = (problem: Problem): ReadonlyArray<{ field: string; message: string }> => {
  const errors = problem.error?.errors
  return Array.isArray(errors)
    ? errors.filter((e): e is { field: string; message: string } => typeof e?.field === "string" && typeof e?.message === "string")
    : []
}

export const refusalOf = (what: string, problem: Problem): RefusalValue => ({ what, why: problemWords(problem), issues: problemIssues(problem) })

/**
 * A refusal at the control that caused it (not at the top of the page):
 * announced, and focused when it appears, so the browser scrolls to it and a
 * screen reader reads it.
 */
export const Refusal = ({ id, refusal, onDismiss, children }: {
  id: string
  refusal: RefusalValue | undefined
  onDismiss?: () => void
  /** Said after the reason, and announced when it changes, without moving the focus again. */
  children?: ComponentChildren
}) => {
  const ref = useRef<HTMLDivElement>(null)
  useEffect(() => {
    if (refusal !== undefined) ref.current?.focus()
  }, [refusal])
  return (
    <div id={id} class="refusal-slot" role="alert">
      {refusal && (
        <div class="notice error refusal" tabIndex={-1} ref={ref}>
          <div>
            <p><strong>{refusal.what} refused.</strong> {refusal.why}</p>
            {(refusal.issues ?? []).length > 0 && (
              <ul class="issues">
                {refusal.issues!.map((issue, i) => (
                  <li key={i}>{issue.field !== "" && <><code>{issue.field}</code>: </>}{issue.message}</li>
                ))}
              </ul>
            )}
            {children}
          </div>
          {onDismiss && <button type="button" class="link" onClick={onDismiss}>Dismiss</button>}
        </div>
      )}
    </div>
  )
}
