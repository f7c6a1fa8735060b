/**
 * An agent that asks svc before it runs a tool, with the typed client
 * (docs/approvals.md, "The agent loop"):
 *
 *   1. send the governed step;
 *   2. `allow`: run the tool; `reject`: do not;
 *   3. `pending`: wait on the session stream for the approval to close, read
 *      the approval, and run the tool only if it was approved, or expired
 *      with the timeout action `allow`. A person who approved with edits
 *      gave `approved_arguments`: the tool runs with those, and the outcome
 *      carries their `arguments_digest`. A person who rejected may have
 *      answered instead (`response`): the agent passes it on (here, prints it).
 *      An approval that needs several approvers (`quorum`) stays pending
 *      until enough have approved: each vote arrives as `approval:voted`
 *      (printed), and the agent waits on until the approval closes;
 *   4. before running the tool, read the step's recorded outcome: a step
 *      with an outcome has run (the agent crashed after reporting it), so
 *      the tool does not run again;
 *   5. run the tool with the step as its idempotency key, and report its
 *      outcome on the step.
 *
 * It never sends the step again to learn the decision: a re-sent `step_id`
 * answers what it answered first (`pending`), whatever happened since.
 *
 *   SVC_URL=http://127.0.0.1:8080 SVC_API_KEY=$KEY npm run -s example:agent -- payments.refund refund-1 '{"amount":42}'
 *
 * (`npm run` runs it on the Node 24 of the dev dependencies, whatever Node
 * the shell has; `node examples/agent.ts` needs Node >= 22.18.)
 *
 * The key needs `agents.write` and `agents.read`. `SVC_SESSION_ID` continues
 * a session; without it the agent starts one. It prints one line per change.
 */
import { SvcClient } from "@svc/client"
import { Effect, Option, Schedule, type Schema, Stream } from "effect"

const [actionClass, stepId, argumentsJson = "{}"] = process.argv.slice(2)
if (actionClass === undefined || stepId === undefined) {
  console.error("usage: npm run -s example:agent -- ACTION_CLASS STEP_ID [ARGUMENTS_JSON]")
  process.exit(2)
}
const stepArguments: Schema.Json = JSON.parse(argumentsJson)
const tool = "example.echo"

/**
 * The tool: here it only echoes its arguments. A real agent calls the API it
 * governs with the step as the idempotency key (Stripe's `Idempotency-Key`,
 * ...): when the agent crashed after the tool ran and before its outcome was
 * recorded, the run repeated on restart acts once.
 */
const runTool = (idempotencyKey: string, args: Schema.Json) =>
  Effect.succeed({ echoed: args, idempotency_key: idempotencyKey })

/** A transport failure (svc restarting, a dropped connection) is worth another try; an API answer is not. */
const retryTransport = <A, E extends { readonly _tag: string }, R>(self: Effect.Effect<A, E, R>) =>
  Effect.retry(self, {
    schedule: Schedule.spaced("1 second"),
    times: 60,
    while: (error) => error._tag === "HttpClientError"
  })

const agent = Effect.gen(function*() {
  const svc = yield* SvcClient
  const sessionId = process.env.SVC_SESSION_ID ??
    (yield* svc.agentSessions.create({ payload: {} }).pipe(retryTransport)).id
  console.log(`session ${sessionId}`)
  const params = { session_id: sessionId }

  // 1. The governed step. Re-sending it (after a crash) is safe: it answers the same.
  const answer = yield* svc.agentSessions.governStep({
    params,
    payload: { step_id: stepId, tool, action_class: actionClass, arguments: stepArguments }
  }).pipe(retryTransport)
  console.log(
    `step ${stepId}: ${answer.decision}${answer.approval_id === undefined ? "" : ` approval ${answer.approval_id}`}`
  )

  let run = answer.decision === "allow"
  // The arguments the tool runs with: the step's, unless a person approved edited ones.
  let toolArguments = stepArguments
  let argumentsDigest: string | undefined
  if (answer.decision === "pending") {
    const approvalId = answer.approval_id!
    // 3. Wait until the approval closes. The stream replays the session's
    // events from `after`, so a decision made before it opened is not missed;
    // when it ends (svc restarting) the loop resumes after the last event seen.
    let approval = yield* svc.approvals.get({ params: { approval_id: approvalId } }).pipe(retryTransport)
    if (approval.status === "pending") {
      console.log(`waiting for approval ${approvalId}`)
      let after = "0"
      let closed = false
      while (!closed) {
        // Suspended, so that each retry reconnects after the last event seen.
        const close = yield* Effect.suspend(() => svc.agentSessions.stream({ params, query: { after } })).pipe(
          Effect.flatMap((events) =>
            events.pipe(
              Stream.tap((event) => Effect.sync(() => (after = event.id))),
              // With a quorum, each approving vote that leaves it pending arrives as `approval:voted`.
              Stream.tap((event) => {
                const vote = event.data as {
                  readonly approval_id?: string
                  readonly decided_by?: string
                  readonly approvals_remaining?: number
                }
                return event.event === "approval:voted" && vote.approval_id === approvalId
                  ? Effect.sync(() =>
                    console.log(`vote approve by ${vote.decided_by}: ${vote.approvals_remaining} more needed`)
                  )
                  : Effect.void
              }),
              Stream.filter((event) =>
                (event.event === "approval:decided" || event.event === "approval:expired") &&
                (event.data as { readonly approval_id?: string }).approval_id === approvalId
              ),
              Stream.runHead
            )
          ),
          retryTransport
        )
        closed = Option.isSome(close)
      }
      // The approval read is the answer; the stream event only woke the agent.
      approval = yield* svc.approvals.get({ params: { approval_id: approvalId } }).pipe(retryTransport)
    }
    console.log(
      `approval ${approvalId}: ${approval.status}${
        approval.status === "expired" ? ` (timeout action ${approval.timeout_action})` : ""
      }`
    )
    run = approval.status === "approved" || (approval.status === "expired" && approval.timeout_action === "allow")
    if (approval.approved_arguments !== undefined) {
      toolArguments = approval.approved_arguments
      argumentsDigest = approval.arguments_digest
      console.log(`arguments edited: ${(approval.arguments_changed ?? []).join(" ")}`)
    }
    if (approval.response !== undefined) console.log(`response: ${JSON.stringify(approval.response)}`)
  }

  if (!run) {
    console.log(`tool ${tool}: not run`)
    return
  }
  // 4. A step whose outcome is recorded has run: the session's steps, a page at a time, say so.
  let cursor: string | undefined
  do {
    const page = yield* svc.agentSessions.get({ params, query: cursor === undefined ? {} : { cursor } }).pipe(
      retryTransport
    )
    const recorded = page.steps.find((step) => step.step_id === stepId)?.outcome
    if (recorded !== undefined) {
      console.log(`outcome ${recorded.status} already recorded: tool ${tool} not run again`)
      return
    }
    cursor = page.next_cursor ?? undefined
  } while (cursor !== undefined)
  // 5. Run the tool, idempotent by step, then report how it ended (tool:succeeded or tool:failed on the session stream).
  const outcome = yield* runTool(`${sessionId}/${stepId}`, toolArguments).pipe(
    Effect.map((result) => ({ status: "succeeded" as const, result })),
    Effect.catch((error) => Effect.succeed({ status: "failed" as const, error: String(error) }))
  )
  console.log(`tool ${tool}: ${outcome.status}`)
  // An outcome of edited arguments carries their digest: svc refuses it for any other arguments.
  const payload = argumentsDigest === undefined ? outcome : { ...outcome, arguments_digest: argumentsDigest }
  const step = yield* svc.agentSessions.reportOutcome({ params: { ...params, step_id: stepId }, payload }).pipe(
    retryTransport
  )
  console.log(`outcome ${step.outcome?.status} recorded`)
})

const baseUrl = process.env.SVC_URL ?? "http://127.0.0.1:8080"
Effect.runPromiseExit(agent.pipe(Effect.provide(SvcClient.layer({ baseUrl, apiKey: process.env.SVC_API_KEY })))).then(
  (exit) => {
    if (exit._tag === "Failure") {
      console.error(String(exit.cause))
      process.exitCode = 1
    }
  }
)
