/**
 * The problem examples that capabilities keep beside their own schemas
 * (idempotency, decisions with edits, the MCP gateway), gathered for
 * `ProblemExamples` in `Documentation.ts`.
 */
import { decisionProblemExamples } from "./ApprovalEdits.ts"
import { idempotencyProblemExamples } from "./Idempotency.ts"
import { mcpProblemExamples } from "./McpProblems.ts"

export const capabilityProblemExamples = {
  ...idempotencyProblemExamples,
  ...decisionProblemExamples,
  ...mcpProblemExamples
}
