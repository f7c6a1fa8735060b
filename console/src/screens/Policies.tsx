/**
 * "Policies": the organization's approval policies by action class, and the
 * editor of one (`?class=`): its settings, its ordered rules on arguments,
 * its arguments schema as JSON, a dry run of the unsaved policy, and
 * "Save policy". A rule the service refuses (a condition that does not
 * parse or type-check, a limit) is shown next to that rule, with the
 * position the service names.
 */
import { Exit } from "effect"
import { useEffect, useState } from "preact/hooks"
import type { Policy, PolicyMode } from "../../../src/api/Policies.ts"
import { problemOf, SvcApi } from "../api.ts"
import { useAtomValue, useMutation } from "../atoms.ts"
import { setQuery, useLocation } from "../router.ts"
import { Loaded, Notice, type NoticeValue, Refusal, refusalOf, type RefusalValue, Time } from "../ui.tsx"
import { DraftError, draftOf, emptyDraft, payloadOf, placeOf, type PolicyDraft } from "./policy-draft.ts"
import { DeadlineFields, DryRun, RulesEditor } from "./PolicyRules.tsx"

const policiesAtom = SvcApi.query("approvalPolicies", "list", { reactivityKeys: ["policies"] })
const putAtom = SvcApi.mutation("approvalPolicies", "put")

const ACTION_CLASS = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/u

const MODES: ReadonlyArray<readonly [PolicyMode, string]> = [
  ["require_approval", "require approval"],
  ["allow", "allow"],
  ["reject", "reject"]
]

export const Policies = () => {
  const { query } = useLocation()
  const selected = query.get("class") ?? undefined
  const policies = useAtomValue(policiesAtom)
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title" tabIndex={-1}>Policies</h1>
      <Loaded result={policies} what="the policies">
        {(value) =>
          selected === undefined
            ? <PolicyList policies={value.policies} />
            : (
              <PolicyEditor
                key={selected}
                actionClass={selected}
                stored={value.policies.find((policy) => policy.action_class === selected)}
              />
            )}
      </Loaded>
    </section>
  )
}

const ruleCount = (policy: Policy) => policy.rules.length === 0 ? "none" : String(policy.rules.length)

const PolicyList = ({ policies }: { policies: ReadonlyArray<Policy> }) => {
  const [newClass, setNewClass] = useState("")
  const valid = ACTION_CLASS.test(newClass)
  return (
    <>
      <p class="muted">
        Per action class: what a governed step gets (allow, reject, or ask a person), and rules on its arguments that decide first. An
        action class without a policy asks a person (review 900 s, notice 300 s, timeout action reject).
      </p>
      {policies.length === 0
        ? <p class="empty">No policies yet.</p>
        : (
          <div class="table-wrap">
            <table aria-labelledby="policies-title">
              <caption id="policies-title" class="sr-only">Approval policies</caption>
              <thead><tr><th scope="col">Action class</th><th scope="col">Mode</th><th scope="col">Rules</th><th scope="col">Updated</th></tr></thead>
              <tbody>
                {policies.map((policy) => (
                  <tr key={policy.action_class}>
                    <td data-label="Action class"><a href={`/console/policies?class=${encodeURIComponent(policy.action_class)}`}>{policy.action_class}</a></td>
                    <td data-label="Mode">{policy.mode}</td>
                    <td data-label="Rules">{ruleCount(policy)}</td>
                    <td data-label="Updated"><Time iso={policy.updated_at} /></td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      <form
        class="form card"
        aria-labelledby="new-policy-title"
        onSubmit={(event) => {
          event.preventDefault()
          if (valid) setQuery({ class: newClass })
        }}
      >
        <h2 id="new-policy-title">New policy</h2>
        <label>
          Action class
          <input
            required
            value={newClass}
            placeholder="payments.refund"
            aria-describedby="new-class-hint"
            onInput={(event) => setNewClass(event.currentTarget.value)}
          />
        </label>
        <p id="new-class-hint" class="muted">1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit.</p>
        <div class="actions"><button type="submit" disabled={!valid}>Edit new policy</button></div>
      </form>
    </>
  )
}

const PolicyEditor = (
  { actionClass, stored }: { actionClass: string; stored: Policy | undefined }
) => {
  // What Save policy did, said under it: the success, or the refusal naming the policy and why.
  const [notice, setNotice] = useState<NoticeValue | undefined>(undefined)
  const [refusal, setRefusal] = useState<RefusalValue | undefined>(undefined)
  const [draft, setDraft] = useState<PolicyDraft>(() => (stored ? draftOf(stored) : emptyDraft()))
  const [ruleErrors, setRuleErrors] = useState<ReadonlyMap<number, string>>(new Map())
  const [schemaError, setSchemaError] = useState<string | undefined>(undefined)
  const put = useMutation(putAtom)
  const change = (changed: Partial<PolicyDraft>) => setDraft((current) => ({ ...current, ...changed }))
  useEffect(() => {
    document.title = `${actionClass} · Policies · svc console`
  }, [actionClass])
  const showErrors = (errors: ReadonlyMap<number, string>, schema: string | undefined) => {
    setRuleErrors(errors)
    setSchemaError(schema)
  }
  return (
    <>
      <p><a href="/console/policies">All policies</a></p>
      <form
        class="stack"
        aria-labelledby="policy-title"
        onSubmit={async (event) => {
          event.preventDefault()
          setNotice(undefined)
          setRefusal(undefined)
          let payload
          try {
            payload = payloadOf(draft)
          } catch (error) {
            if (error instanceof DraftError) return showErrors(new Map(), error.message)
            throw error
          }
          const exit = await put.run({ params: { action_class: actionClass }, payload, reactivityKeys: ["policies"] })
          if (Exit.isSuccess(exit)) {
            showErrors(new Map(), undefined)
            setDraft(draftOf(exit.value))
            return setNotice({ tone: "success", text: `Policy for ${actionClass} saved: it decides the next governed step.` })
          }
          const problem = problemOf(exit.cause)
          const place = placeOf(problem.error?.field as string | undefined)
          const message = problem.detail ?? problem.title
          if (place && "rule" in place) showErrors(new Map([[place.rule, message]]), undefined)
          else if (place && "schema" in place) showErrors(new Map(), message)
          setRefusal(refusalOf(`Saving the policy for ${actionClass}`, problem))
        }}
      >
        <h2 id="policy-title">{actionClass}</h2>
        <p class="muted">{stored ? <>Saved <Time iso={stored.updated_at} />.</> : "Not saved yet: the default policy applies until you save."}</p>
        <fieldset class="stack">
          <legend>Settings (when no rule decides)</legend>
          <label>
            Mode
            <select value={draft.mode} onChange={(event) => change({ mode: event.currentTarget.value as PolicyMode })}>
              {MODES.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
            </select>
          </label>
          <DeadlineFields id="policy" value={draft.deadlines} onChange={(deadlines) => change({ deadlines })} />
        </fieldset>
        <RulesEditor rules={draft.rules} errors={ruleErrors} onChange={(rules) => change({ rules })} />
        <label class="wide">
          Arguments schema (JSON Schema of the tool's arguments; empty for none)
          <textarea
            class="mono"
            rows={5}
            spellcheck={false}
            value={draft.schema}
            aria-invalid={schemaError ? "true" : undefined}
            aria-describedby={schemaError ? "schema-error" : undefined}
            onInput={(event) => change({ schema: event.currentTarget.value })}
          />
        </label>
        {schemaError && <p id="schema-error" class="field-error" role="alert">{schemaError}</p>}
        <div class="actions"><button type="submit" class="primary" disabled={put.busy}>Save policy</button></div>
        <Notice notice={notice} onClose={() => setNotice(undefined)} />
        <Refusal id="policy-refusal" refusal={refusal} onDismiss={() => setRefusal(undefined)} />
      </form>
      <DryRun actionClass={actionClass} draft={draft} onRuleErrors={showErrors} />
    </>
  )
}
