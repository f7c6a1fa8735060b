/**
 * The parts of the Policies screen's editor: deadline settings (the
 * class's, or a rule's `require_approval`), the ordered rules with their
 * conditions and results, and the dry run of the unsaved policy.
 */
import { Exit } from "effect"
import { useState } from "preact/hooks"
import type { DryRunAnswer } from "../../../src/api/Policies.ts"
import { problemOf, SvcApi } from "../api.ts"
import { useMutation } from "../atoms.ts"
import { describeProblem } from "../ui.tsx"
import { type DeadlineDraft, DraftError, move, newRule, payloadOf, placeOf, type PolicyDraft, type RuleDecision, type RuleDraft } from "./policy-draft.ts"

const dryRunAtom = SvcApi.mutation("approvalPolicies", "dryRun")

/** Review window, notice, escalation, timeout action and quorum, as number fields; the reviewer groups by name. */
export const DeadlineFields = (
  { id, value, onChange }: { id: string; value: DeadlineDraft; onChange: (value: DeadlineDraft) => void }
) => {
  const field = (key: "review" | "notice" | "escalation" | "quorum", label: string, min: number, placeholder?: string) => (
    <label>
      {label}
      <input
        id={`${id}-${key}`}
        type="number"
        inputMode="numeric"
        min={min}
        step={1}
        required={key === "review" || key === "notice"}
        placeholder={placeholder}
        value={value[key]}
        onInput={(event) => onChange({ ...value, [key]: event.currentTarget.value })}
      />
    </label>
  )
  const group = (key: "group" | "escalationChain", label: string, placeholder = "none") => (
    <label>
      {label}
      <input
        id={`${id}-${key}`}
        placeholder={placeholder}
        value={value[key]}
        onInput={(event) => onChange({ ...value, [key]: event.currentTarget.value })}
      />
    </label>
  )
  return (
    <div class="form">
      {field("review", "Review seconds", 1)}
      {field("notice", "Expiring notice seconds", 0)}
      {field("escalation", "Escalation seconds", 1, "none")}
      <label>
        Timeout action
        <select value={value.timeout} onChange={(event) => onChange({ ...value, timeout: event.currentTarget.value as DeadlineDraft["timeout"] })}>
          <option value="reject">reject</option>
          <option value="allow">allow</option>
        </select>
      </label>
      {field("quorum", "Quorum (approvers)", 1, "1")}
      {group("group", "Reviewer group")}
      {group("escalationChain", "Escalation chain", "none (groups in order, comma-separated)")}
    </div>
  )
}

const DECISIONS: ReadonlyArray<readonly [RuleDecision, string]> = [
  ["allow", "allow"],
  ["reject", "reject with a reason"],
  ["require_approval", "require approval"]
]

const RuleEditor = (
  { rule, index, count, error, onChange, onMove, onRemove }: {
    rule: RuleDraft
    index: number
    count: number
    error: string | undefined
    onChange: (rule: RuleDraft) => void
    onMove: (by: number) => void
    onRemove: () => void
  }
) => {
  const name = rule.name.trim() || `the rule at position ${index + 1}`
  const title = `Position ${index + 1}${rule.name.trim() ? `: ${rule.name.trim()}` : ""}`
  const errorId = `rule-${rule.key}-error`
  return (
    <li>
      <fieldset class={`stack rule${error ? " has-error" : ""}`}>
        <legend>{title}</legend>
        <div class="form">
          <label>
            Name
            <input required value={rule.name} onInput={(event) => onChange({ ...rule, name: event.currentTarget.value })} />
          </label>
          <label>
            Result
            <select value={rule.decision} onChange={(event) => onChange({ ...rule, decision: event.currentTarget.value as RuleDecision })}>
              {DECISIONS.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
            </select>
          </label>
        </div>
        <label class="wide">
          Condition (CEL)
          <textarea
            class="mono"
            rows={2}
            required
            spellcheck={false}
            placeholder="arguments.amount > 100.0"
            value={rule.condition}
            aria-invalid={error ? "true" : undefined}
            aria-describedby={error ? errorId : undefined}
            onInput={(event) => onChange({ ...rule, condition: event.currentTarget.value })}
          />
        </label>
        {error && <p id={errorId} class="field-error" role="alert">{error}</p>}
        {rule.decision === "reject" && (
          <label class="wide">
            Reason given to the agent
            <input required value={rule.reason} onInput={(event) => onChange({ ...rule, reason: event.currentTarget.value })} />
          </label>
        )}
        {rule.decision === "require_approval" && (
          <DeadlineFields id={`rule-${rule.key}`} value={rule.deadlines} onChange={(deadlines) => onChange({ ...rule, deadlines })} />
        )}
        <div class="actions">
          <button type="button" disabled={index === 0} aria-label={`Move ${name} up`} onClick={() => onMove(-1)}>Up</button>
          <button type="button" disabled={index === count - 1} aria-label={`Move ${name} down`} onClick={() => onMove(1)}>Down</button>
          <button type="button" class="danger" aria-label={`Remove ${name}`} onClick={onRemove}>Remove</button>
        </div>
      </fieldset>
    </li>
  )
}

/** The ordered rules: the first whose condition holds decides. */
export const RulesEditor = (
  { rules, errors, onChange }: {
    rules: ReadonlyArray<RuleDraft>
    /** Problems by rule position, from the last save or dry run. */
    errors: ReadonlyMap<number, string>
    onChange: (rules: ReadonlyArray<RuleDraft>) => void
  }
) => (
  <section aria-labelledby="rules-title">
    <h3 id="rules-title">Rules on arguments</h3>
    <p class="muted">
      In order, before the settings above: the first rule whose condition holds decides the step. Conditions are CEL over{" "}
      <code>tool</code>, <code>arguments</code> and <code>session</code>.
    </p>
    {rules.length === 0 && <p class="empty">No rules: the settings above decide every step.</p>}
    <ol class="rules">
      {rules.map((rule, index) => (
        <RuleEditor
          key={rule.key}
          rule={rule}
          index={index}
          count={rules.length}
          error={errors.get(index)}
          onChange={(changed) => onChange(rules.map((old) => (old.key === rule.key ? changed : old)))}
          onMove={(by) => onChange(move(rules, index, by))}
          onRemove={() => onChange(rules.filter((old) => old.key !== rule.key))}
        />
      ))}
    </ol>
    <button type="button" onClick={() => onChange([...rules, newRule(rules.length)])}>Add rule</button>
  </section>
)

const describeAnswer = (answer: DryRunAnswer): string => {
  const by = answer.rule === null ? "the action class's settings" : `rule ${answer.rule}`
  const what = answer.decision === "pending"
    ? `require approval${answer.approval?.quorum ? ` by ${answer.approval.quorum} people` : ""} (review ${answer.approval?.review_seconds} s, then ${answer.approval?.timeout_action})`
    : answer.decision
  return `Decided by ${by}: ${what}${answer.reason ? `. Reason: ${answer.reason}` : ""}.`
}

/**
 * A sample step tried against the policy being edited (not saved): which
 * rule decides and what it answers. A rule the service refuses is reported
 * next to the rule through `onRuleErrors`.
 */
export const DryRun = (
  { actionClass, draft, onRuleErrors }: {
    actionClass: string
    draft: PolicyDraft
    onRuleErrors: (errors: ReadonlyMap<number, string>, schema: string | undefined) => void
  }
) => {
  const [tool, setTool] = useState("refund")
  const [args, setArgs] = useState("{\n  \"amount\": 120\n}")
  const [sessionId, setSessionId] = useState("")
  const [outcome, setOutcome] = useState<{ answer?: DryRunAnswer; problem?: string } | undefined>(undefined)
  const [argsError, setArgsError] = useState<string | undefined>(undefined)
  const dryRun = useMutation(dryRunAtom)
  return (
    <form
      class="stack card"
      aria-labelledby="dry-run-title"
      onSubmit={async (event) => {
        event.preventDefault()
        setOutcome(undefined)
        setArgsError(undefined)
        let sample: unknown
        try {
          sample = JSON.parse(args)
        } catch (error) {
          return setArgsError(`Not JSON: ${(error as Error).message}`)
        }
        let policy
        try {
          policy = payloadOf(draft)
        } catch (error) {
          if (error instanceof DraftError) onRuleErrors(new Map(), error.message)
          return setOutcome({ problem: "Fix the policy first: its arguments schema is not JSON." })
        }
        const exit = await dryRun.run({
          params: { action_class: actionClass },
          payload: {
            tool,
            arguments: sample as never,
            ...(sessionId.trim() === "" ? {} : { session: { id: sessionId.trim() } }),
            policy
          }
        })
        if (Exit.isSuccess(exit)) {
          onRuleErrors(new Map(), undefined)
          return setOutcome({ answer: exit.value })
        }
        const problem = problemOf(exit.cause)
        const place = placeOf(problem.error?.field as string | undefined)
        const message = problem.detail ?? problem.title
        if (place && "rule" in place) onRuleErrors(new Map([[place.rule, message]]), undefined)
        else if (place && "schema" in place) onRuleErrors(new Map(), message)
        setOutcome({ problem: place ? `The policy was refused: ${message}` : `Could not try the policy: ${describeProblem(problem)}` })
      }}
    >
      <h3 id="dry-run-title">Dry run</h3>
      <p class="muted">Tries the policy as edited here, before saving, on a sample step. Nothing is created or stored.</p>
      <label>
        Tool
        <input required value={tool} onInput={(event) => setTool(event.currentTarget.value)} />
      </label>
      <label class="wide">
        Arguments (JSON)
        <textarea
          class="mono"
          rows={4}
          spellcheck={false}
          value={args}
          aria-invalid={argsError ? "true" : undefined}
          aria-describedby={argsError ? "dry-run-arguments-error" : undefined}
          onInput={(event) => setArgs(event.currentTarget.value)}
        />
      </label>
      {argsError && <p id="dry-run-arguments-error" class="field-error">{argsError}</p>}
      <label>
        Session id (optional)
        <input size={38} value={sessionId} placeholder="00000000-0000-0000-0000-000000000000" onInput={(event) => setSessionId(event.currentTarget.value)} />
      </label>
      <div class="actions"><button type="submit" disabled={dryRun.busy}>Dry run</button></div>
      <div role="status" aria-label="Dry run result">
        {outcome?.answer && (
          <div class={`notice ${outcome.answer.decision === "allow" ? "success" : outcome.answer.decision === "reject" ? "warning" : "info"}`}>
            <p data-dry-run-rule={outcome.answer.rule ?? ""}>{describeAnswer(outcome.answer)}</p>
            {outcome.answer.error && (
              <p>Rule {outcome.answer.error.rule} could not be evaluated for this step: {outcome.answer.error.message}.</p>
            )}
          </div>
        )}
        {outcome?.problem && <p class="notice error">{outcome.problem}</p>}
      </div>
    </form>
  )
}
