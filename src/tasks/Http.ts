import { Effect, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { EXPORT_MEDIA_TYPE } from "../api/Tasks.ts"
import { StreamGuard } from "../identity/StreamGuard.ts"
import { responseHeader } from "../platform/ResponseHeader.ts"
import { DatasetExport } from "./DatasetExport.ts"
import { Tasks } from "./Tasks.ts"
import { busyRetryAfter } from "./ValidationBusy.ts"

export const TasksHandlers = HttpApiBuilder.group(
  Api,
  "tasks",
  Effect.fn(function*(handlers) {
    const tasks = yield* Tasks
    return handlers.handleAll({
      create: ({ payload }) =>
        CurrentPrincipal.use((p) => tasks.create(p.orgId, payload)).pipe(
          Effect.tapErrorTag("ValidationBusy", () => busyRetryAfter)
        ),
      list: ({ query }) => CurrentPrincipal.use((p) => tasks.list(p.orgId, query)),
      get: ({ params }) => CurrentPrincipal.use((p) => tasks.get(p.orgId, params.task_id)),
      // Plain steps, no generator: every logged run passes here.
      logRun: ({ params, payload }) =>
        CurrentPrincipal.use((p) =>
          Effect.flatMap(
            tasks.logRun(p.orgId, params.task_id, payload),
            (run) => Effect.as(responseHeader("x-svc-trace-id", run.trace_id), run)
          )
        ),
      listRuns: ({ params, query }) => CurrentPrincipal.use((p) => tasks.listRuns(p.orgId, params.task_id, query)),
      getRun: ({ params }) => CurrentPrincipal.use((p) => tasks.getRun(p.orgId, params.trace_id))
    })
  })
)

export const DatasetsHandlers = HttpApiBuilder.group(
  Api,
  "datasets",
  Effect.fn(function*(handlers) {
    const tasks = yield* Tasks
    const exports = yield* DatasetExport
    const guard = yield* StreamGuard
    return handlers.handleAll({
      listForTask: ({ params, query }) =>
        CurrentPrincipal.use((p) => tasks.listDatasets(p.orgId, params.task_id, query)),
      get: ({ params, query }) => CurrentPrincipal.use((p) => tasks.getDataset(p.orgId, params.dataset_id, query)),
      // The bytes are written here rather than encoded by the endpoint's
      // schema: the checksum sent first is of exactly these bytes.
      export: ({ params, query }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const after = query.after ?? 0
          // Counted as a stream from here until the response is written (the
          // request's scope): a first export's measuring pass counts too.
          yield* guard.admit(principal)
          const answer = yield* exports.open(principal.orgId, params.dataset_id, after)
          // The guard ends a stream quietly when its credential is revoked; an
          // export that ends before its last line must instead cut the
          // connection, or a resumed one (no Content-Length) would look complete.
          let finished = false
          const guarded = guard.watch(
            principal,
            Stream.concat(answer.body, Stream.fromEffectDrain(Effect.sync(() => (finished = true))))
          )
          const body = Stream.concat(
            guarded,
            Stream.fromEffectDrain(Effect.suspend(() => finished ? Effect.void : Effect.interrupt))
          )
          return HttpServerResponse.stream(body, {
            contentType: EXPORT_MEDIA_TYPE,
            // Known for the whole export only; a resumed one ends with its last chunk.
            ...(after === 0 ? { contentLength: answer.bytes } : {}),
            headers: {
              "repr-digest": `sha-256=:${answer.sha256}:`,
              "x-svc-example-count": String(answer.lines),
              "content-disposition": `attachment; filename="dataset-${params.dataset_id}-v${answer.version}.jsonl"`,
              "cache-control": "private, no-store"
            }
          })
        })
    })
  })
)
