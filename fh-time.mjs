import { PGlite } from "@electric-sql/pglite"
const a = await PGlite.create()
const dump = await a.dumpDataDir("none")
console.log("dump bytes", dump.size)
await a.close()
for (let i = 0; i < 2; i++) {
const t1 = performance.now()
const db = await PGlite.create({ loadDataDir: dump })
const t2 = performance.now()
const t3 = performance.now()
const b = await PGlite.create()
const t4 = performance.now()
console.log("load", Math.round(t2-t1), "fresh", Math.round(t4-t3))
}
