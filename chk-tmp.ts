import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { Database } from "./src/database/Database.ts"
for (let i = 0; i < 10; i++) {
  const u0 = process.resourceUsage(); const t = performance.now()
  const r = await Effect.runPromise(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql`SHOW shared_buffers`
  }).pipe(Effect.provide(Database.memoryFrom("/tmp/svcsnap.tar")), Effect.scoped))
  const u1 = process.resourceUsage()
  console.log(r[0], (performance.now()-t).toFixed(0), "ms", ((u1.userCPUTime-u0.userCPUTime+u1.systemCPUTime-u0.systemCPUTime)/1000).toFixed(0), "cpu-ms", u1.minorPageFault-u0.minorPageFault)
}
