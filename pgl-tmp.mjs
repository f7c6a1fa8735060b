import { PGlite } from "@electric-sql/pglite"
import * as fs from "node:fs"
const base = ["--single","-F","-O","-j","-c","search_path=public","-c","exit_on_error=false","-c","log_checkpoints=false","-c","max_worker_processes=0","-c","max_parallel_workers=0","-c","max_parallel_workers_per_gather=0","-c","io_method=sync","-c","max_parallel_maintenance_workers=0"]
const mod = await WebAssembly.compile(fs.readFileSync("node_modules/@electric-sql/pglite/dist/pglite.wasm"))
const snap = fs.readFileSync("/tmp/svcsnap.tar")
for (const sb of ["", "16MB", "", "16MB", "", "16MB", "", "16MB"]) {
  const extra = sb ? ["-c", `shared_buffers=${sb}`] : []
  const u0 = process.resourceUsage(); const t = performance.now()
  const db = await PGlite.create({ startParams: [...base, ...extra], loadDataDir: new Blob([snap]), pgliteWasmModule: mod })
  await db.query("select count(*) from pg_class")
  const u1 = process.resourceUsage()
  console.log(sb || "128MB", (performance.now()-t).toFixed(0), "ms", "user", ((u1.userCPUTime-u0.userCPUTime)/1000).toFixed(0), "sys", ((u1.systemCPUTime-u0.systemCPUTime)/1000).toFixed(0), "faults", u1.minorPageFault-u0.minorPageFault)
  await db.close()
}
