/** The settings of rules on arguments (docs/approvals.md, "Rules on arguments"; read by `Config.ts`). */
export interface ApprovalRuleSettings {
  /** Rules per policy, a condition's characters, AST nodes and nesting depth: checked when a policy is stored. */
  readonly maxRules: number
  readonly maxLength: number
  readonly maxNodes: number
  readonly maxDepth: number
  /** The rule workers: the deadline of a policy's rules on one step, each worker's heap, their number and queue. */
  readonly timeoutMs: number
  readonly heapMb: number
  readonly workers: number
  readonly queue: number
  /** Dry runs one organization may make per minute (all processes together). */
  readonly dryRunsPerMinute: number
}
