import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { responseHeader } from "../platform/ResponseHeader.ts"
import { busyRetryAfter } from "./ValidationBusy.ts"
import { Tasks } from "./Tasks.ts"

export const TasksHandlers = HttpApiBuilder.group(
  Api,
  "tasks",
  Effect.fn(function*(handlers) {
    const tasks = yield* Tasks
    return handlers.handleAll({
      create: ({ payload }) =>
        CurrentPrincipal.use((p) => tasks.create(p.orgId, payload)).pipe(Effect.tapErrorTag("ValidationBusy", () => busyRetryAfter)),
      list: ({ query }) => CurrentPrincipal.use((p) => tasks.list(p.orgId, query)),
      get: ({ params }) => CurrentPrincipal.use((p) => tasks.get(p.orgId, params.task_id)),
      logRun: ({ params, payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const run = yield* tasks.logRun(principal.orgId, params.task_id, payload)
          yield* responseHeader("x-svc-trace-id", run.trace_id)
          return run
        }),
      listRuns: ({ params, query }) =>
        CurrentPrincipal.use((p) => tasks.listRuns(p.orgId, params.task_id, query)),
      getRun: ({ params }) => CurrentPrincipal.use((p) => tasks.getRun(p.orgId, params.trace_id))
    })
  })
)

export const DatasetsHandlers = HttpApiBuilder.group(
  Api,
  "datasets",
  Effect.fn(function*(handlers) {
    const tasks = yield* Tasks
    return handlers.handleAll({
      listForTask: ({ params, query }) => CurrentPrincipal.use((p) => tasks.listDatasets(p.orgId, params.task_id, query)),
      get: ({ params, query }) => CurrentPrincipal.use((p) => tasks.getDataset(p.orgId, params.dataset_id, query))
    })
  })
)
