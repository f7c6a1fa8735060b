import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import fc from "fast-check"
import * as fs from "node:fs"
import * as path from "node:path"
import { VERSION } from "../../../src/api/Version.ts"
import { compareVersions, refusal } from "../../../src/database/Migrations.ts"
import { migrationsByRelease, releaseOf } from "../../../src/database/migrations/index.ts"

const dir = path.join(import.meta.dirname, "../../../src/database/migrations")

describe("migration ids", () => {
  it("index.ts lists every migration file once, in ascending id order (the migrator skips an id below the latest applied)", () => {
    const index = fs.readFileSync(path.join(dir, "index.ts"), "utf8")
    const listed = [...index.matchAll(/^\s+"(\d{4})_[a-z0-9_]+": m\d{4},?$/gm)].map((m) => m[1]!)
    const files = fs.readdirSync(dir).filter((f) => /^\d{4}_.*\.ts$/.test(f)).map((f) => f.slice(0, 4)).sort()
    assert.deepStrictEqual(listed, files)
    assert.deepStrictEqual([...listed].sort(), listed)
    assert.strictEqual(new Set(listed).size, listed.length)
  })
})

describe("releases of migrations", () => {
  it("releases are listed oldest first, each one's ids above the previous one's, none later than this build", () => {
    const releases = Object.keys(migrationsByRelease)
    assert.deepStrictEqual([...releases].sort(compareVersions), releases)
    assert.isAtMost(compareVersions(releases.at(-1)!, VERSION), 0)
    const ids = Object.values(migrationsByRelease).map((record) =>
      Object.keys(record).map((key) => Number(key.slice(0, 4)))
    )
    for (let i = 1; i < ids.length; i++) assert.isAbove(Math.min(...ids[i]!), Math.max(...ids[i - 1]!))
  })
})

describe("compareVersions orders major.minor.patch by their numbers", () => {
  const version = fc.tuple(fc.nat(30), fc.nat(30), fc.nat(30))
  const text = ([a, b, c]: [number, number, number]) => `${a}.${b}.${c}`

  it("as the tuples of numbers compare (so 0.10.0 is after 0.9.0)", () => {
    fc.assert(fc.property(version, version, (x, y) => {
      const expected = x[0] - y[0] || x[1] - y[1] || x[2] - y[2]
      assert.strictEqual(Math.sign(compareVersions(text(x), text(y))), Math.sign(expected))
    }))
    assert.isAbove(compareVersions("0.10.0", "0.9.0"), 0)
    assert.isAbove(compareVersions("1.0.0", "0.99.99"), 0)
  })

  it("is antisymmetric and zero only for the same version", () => {
    fc.assert(fc.property(version, version, (x, y) => {
      assert.strictEqual(Math.sign(compareVersions(text(x), text(y))), -Math.sign(compareVersions(text(y), text(x))))
      assert.strictEqual(compareVersions(text(x), text(y)) === 0, text(x) === text(y))
    }))
  })
})

describe("a build refuses a database that belongs to a later svc", () => {
  const applied = (key: string, svc_version: string | null) => ({
    migration_id: Number(key.slice(0, 4)),
    name: key.slice(5),
    svc_version
  })
  const known = [...releaseOf].map(([key, release]) => applied(key, release))

  it("its own database, or an older one, or migrations not recorded yet: it starts", () => {
    assert.isTrue(Option.isNone(refusal(VERSION, known)))
    assert.isTrue(Option.isNone(refusal(VERSION, known.filter((migration) => migration.svc_version === "0.1.0"))))
    assert.isTrue(Option.isNone(refusal(VERSION, known.map((migration) => ({ ...migration, svc_version: null })))))
    assert.isTrue(Option.isNone(refusal("9.0.0", known)))
  })

  it("a migration recorded for a later svc: one line naming both versions and that migration", () => {
    const latest = Object.keys(migrationsByRelease[VERSION as keyof typeof migrationsByRelease]).at(-1)
    assert.deepStrictEqual(
      refusal("0.1.0", known),
      Option.some(
        `svc 0.1.0 cannot start: the database schema belongs to svc ${VERSION} (migration ${latest}); upgrade svc or use a database of this version`
      )
    )
    const later = [
      ...known,
      applied("9990_next", "0.10.0"),
      applied("9991_next_patch", "0.10.1"),
      applied("9992_old_record", "0.9.9")
    ]
    assert.include(Option.getOrThrow(refusal("0.9.0", later)), "belongs to svc 0.10.1 (migration 9991_next_patch)")
  })

  it("an applied migration this build does not know, recorded or not", () => {
    assert.include(
      Option.getOrThrow(refusal(VERSION, [...known, applied("9990_elsewhere", VERSION)])),
      `the database has migration 9990_elsewhere (svc ${VERSION}), which this build does not know`
    )
    assert.include(
      Option.getOrThrow(refusal(VERSION, [...known, applied("9990_elsewhere", null)])),
      "the database has migration 9990_elsewhere, which this build does not know"
    )
  })
})
