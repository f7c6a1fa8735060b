/**
 * The approval policies of recent governed steps, kept in the process: a
 * step reads its rule here instead of making a round trip for it (one of
 * the twelve a step used to make; with the rest folded into one statement,
 * an allow step costs svc about a third of the CPU it did, see
 * bench/notes/steps.md).
 *
 * A cached rule is never trusted alone: the step's statement checks that the
 * policy row still has the version the rule was read at (one primary-key
 * probe inside the statement, `StepStatement.ts`; the version moves on
 * every change of the row, whoever makes it, migration
 * `0840_policy_versions`), and when it does not, the step reloads and runs
 * again. So a policy changed through another process applies to the next
 * step at once. The cache only saves the read: a change is announced
 * (`Wakeups` signal `policies:<org id>`: in this process, and by NOTIFY to
 * the others on a server) and drops the organization's rules, and any rule
 * is read again after `POLICY_CACHE_MS` whatever happened.
 */
import { Clock, Effect } from "effect"
import type { PolicyRule } from "./Deadlines.ts"
import type { CompiledRule } from "./Rules.ts"

/** How long a rule is used before it is read again, even without a change announced. */
export const POLICY_CACHE_MS = 5_000

/** Organizations whose rules are kept; beyond it the longest-kept organization goes first. */
export const POLICY_CACHE_ORGS = 10_000

/** Action classes kept per organization (steps may name any number without a policy); beyond it the organization starts afresh. */
export const POLICY_CACHE_RULES_PER_ORG = 1_000

/** A rule and the version of the stored policy it was read from. */
export interface CachedRule {
  readonly rule: PolicyRule
  /** The policy row's `version` (a bigint, as text) when it was read; `null`: the default rule, no row. */
  readonly version: string | null
  /** The policy's rules on arguments, compiled (`Rules.ts`). */
  readonly conditions: ReadonlyArray<CompiledRule>
}

interface OrgEntry {
  /** Moves on every invalidation: a read that started before one is not kept. */
  generation: number
  readonly rules: Map<string, { readonly cached: CachedRule; readonly at: number }>
}

export interface PolicyCache {
  readonly get: (orgId: string, actionClass: string) => Effect.Effect<CachedRule>
  /** Forgets the organization's rules (a policy changed here or in another process). */
  readonly invalidate: (orgId: string) => Effect.Effect<void>
}

export const makePolicyCache = (
  load: (orgId: string, actionClass: string) => Effect.Effect<CachedRule>
): PolicyCache => {
  const orgs = new Map<string, OrgEntry>()

  const entryOf = (orgId: string): OrgEntry => {
    let entry = orgs.get(orgId)
    if (entry === undefined) {
      if (orgs.size >= POLICY_CACHE_ORGS) {
        const oldest = orgs.keys().next()
        if (oldest.done !== true) orgs.delete(oldest.value)
      }
      entry = { generation: 0, rules: new Map() }
      orgs.set(orgId, entry)
    }
    return entry
  }

  const get = (orgId: string, actionClass: string) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const entry = entryOf(orgId)
      const hit = entry.rules.get(actionClass)
      if (hit !== undefined && now - hit.at < POLICY_CACHE_MS) return Effect.succeed(hit.cached)
      const generation = entry.generation
      return Effect.tap(load(orgId, actionClass), (cached) =>
        Effect.sync(() => {
          // Keep it only when no change was announced while it was read.
          if (orgs.get(orgId) !== entry || entry.generation !== generation) return
          if (entry.rules.size >= POLICY_CACHE_RULES_PER_ORG) entry.rules.clear()
          entry.rules.set(actionClass, { cached, at: now })
        }))
    })

  const invalidate = (orgId: string) =>
    Effect.sync(() => {
      const entry = orgs.get(orgId)
      if (entry === undefined) return
      entry.generation++
      entry.rules.clear()
    })

  return { get, invalidate }
}
