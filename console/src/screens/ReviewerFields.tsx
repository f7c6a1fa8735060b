/**
 * Fields the Reviewers screen's forms share: a person (a console person or
 * an API key) with an optional address, the API keys that can review, and
 * the problems of a form, each naming its field.
 */
import { useEffect, useRef } from "preact/hooks"
import type { ApiKey } from "../../../src/api/Console.ts"
import { SvcApi } from "../api.ts"
import { useAtomValue } from "../atoms.ts"
import { type FieldIssue, fieldLabel, type MemberDraft, type MemberKind } from "./reviewer-draft.ts"

const keysAtom = SvcApi.query("apiKeys", "list", { reactivityKeys: ["keys"] })

/** The id of the list of keys a key field offers. */
export const KEY_CHOICES = "reviewer-key-choices"

const canReview = (key: ApiKey) => key.revoked_at === null && key.scopes.includes("approvals.decide")

/** The organization's keys that may review (active, holding `approvals.decide`), offered to key fields; only with `keys.manage`. */
export const KeyChoices = () => {
  const keys = useAtomValue(keysAtom)
  if (keys._tag !== "Success") return null
  return (
    <datalist id={KEY_CHOICES}>
      {keys.value.keys.filter(canReview).map((key) => (
        <option key={key.id} value={key.id} label={`${key.name ?? "unnamed"} (${key.key_prefix}…)`} />
      ))}
    </datalist>
  )
}

/** A key member by its name and prefix where the session may list keys (`named`), and by its id. */
export const KeyMember = ({ id, named }: { id: string; named: boolean }) => (
  <>
    API key {named && <KeyName id={id} />}
    <code class="key-id">{id}</code>
  </>
)

const KeyName = ({ id }: { id: string }) => {
  const keys = useAtomValue(keysAtom)
  const key = keys._tag === "Success" ? keys.value.keys.find((candidate) => candidate.id === id) : undefined
  return key ? <><strong>{key.name ?? "unnamed"}</strong> ({key.key_prefix}…)<br /></> : null
}

/** Whether an issue is about `field` or something inside it. */
export const names = (issues: ReadonlyArray<FieldIssue>, field: string) =>
  issues.some((issue) => issue.field === field || issue.field.startsWith(`${field}.`) || issue.field.startsWith(`${field}[`))

/** The problems of one form, next to it, each naming its field: announced and focused when they appear (as `Refusal` is), so they are in view. */
export const FieldProblems = ({ id, issues, lead }: { id: string; issues: ReadonlyArray<FieldIssue>; lead: string }) => {
  const ref = useRef<HTMLDivElement>(null)
  useEffect(() => {
    if (issues.length > 0) ref.current?.focus()
  }, [issues])
  return (
  <div id={id} role="alert" class="problems-slot">
    {issues.length > 0 && (
      <div class="notice error refusal" tabIndex={-1} ref={ref}>
        <div>
          <p>{lead}</p>
          <ul class="issues">
            {issues.map((issue, i) => (
              <li key={i}>
                {issue.field !== "" && <><strong>{fieldLabel(issue.field)}</strong> (<code>{issue.field}</code>): </>}
                {issue.message}
              </li>
            ))}
          </ul>
        </div>
      </div>
    )}
  </div>
  )
}

export const PersonFields = (
  { id, kind, who, onChange, invalid, keyChoices }: {
    id: string
    kind: MemberKind
    who: string
    onChange: (kind: MemberKind, who: string) => void
    invalid: boolean
    keyChoices: boolean
  }
) => (
  <>
    <label>
      Kind
      <select id={`${id}-kind`} value={kind} onChange={(event) => onChange(event.currentTarget.value as MemberKind, who)}>
        <option value="console_user">Console person</option>
        <option value="key_id">API key</option>
      </select>
    </label>
    <label>
      {kind === "console_user" ? "Console person's name" : "API key id"}
      <input
        id={`${id}-who`}
        required
        value={who}
        placeholder={kind === "console_user" ? "Ana Lima" : "0193b7a2-…"}
        list={kind === "key_id" && keyChoices ? KEY_CHOICES : undefined}
        class={kind === "key_id" ? "key-id" : undefined}
        aria-invalid={invalid ? "true" : undefined}
        onInput={(event) => onChange(kind, event.currentTarget.value)}
      />
    </label>
  </>
)

/** One member of a form: who, and an optional address of their own. */
export const MemberFields = (
  { id, legend, field, value, onChange, issues, keyChoices, children }: {
    id: string
    legend: string
    /** The member's field as the API names it: `members[2]`. */
    field: string
    value: MemberDraft
    onChange: (value: MemberDraft) => void
    issues: ReadonlyArray<FieldIssue>
    keyChoices: boolean
    children?: preact.ComponentChildren
  }
) => {
  const personInvalid = issues.some((issue) => issue.field === field) || names(issues, `${field}.${value.kind}`)
  return (
    <fieldset class="member">
      <legend>{legend}</legend>
      <div class="form">
        <PersonFields
          id={id}
          kind={value.kind}
          who={value.who}
          keyChoices={keyChoices}
          invalid={personInvalid}
          onChange={(kind, who) => onChange({ ...value, kind, who })}
        />
        <label>
          Address (optional)
          <input
            id={`${id}-email`}
            type="email"
            value={value.email}
            placeholder="ana@example.com"
            aria-invalid={names(issues, `${field}.email`) ? "true" : undefined}
            aria-describedby={`${id}-email-hint`}
            onInput={(event) => onChange({ ...value, email: event.currentTarget.value })}
          />
        </label>
        {children}
      </div>
      <p id={`${id}-email-hint`} class="muted">
        Approval mail for the group goes to this address once its owner confirms it from the mail svc sends there.
      </p>
    </fieldset>
  )
}
