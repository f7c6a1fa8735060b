/**
 * `orgs create --name NAME`: names need not be unique, but a name another
 * organization has (in any case) is never made silently: stderr names the
 * namesakes and the new organization. `--json` prints `{"id","name","created_at"}`
 * on stdout either way, so scripts reading it keep working.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { runCommand } from "../../../src/cli/AdminChannel.ts"
import { ConsoleSessions } from "../../../src/console/ConsoleSessions.ts"
import { Identity } from "../../../src/identity/Identity.ts"
import { SvcTest } from "../../../src/testing.ts"

const Services = Layer.mergeAll(Identity.layer, ConsoleSessions.layer, NodeServices.layer).pipe(
  Layer.provideMerge(SvcTest.layer())
)

const named = (name: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql<{ id: string }>`SELECT id FROM orgs WHERE lower(name) = lower(${name})`
  )

layer(Services, { excludeTestServices: true })("creating an organization", (it) => {
  describe("orgs create --name NAME", () => {
    it.effect("prints one JSON object {id, name, created_at}", () =>
      Effect.gen(function*() {
        const answer = yield* runCommand(["orgs", "create", "--name", "Acme Widgets", "--json"])
        assert.strictEqual(answer.code, 0, answer.stderr)
        assert.deepStrictEqual(Object.keys(JSON.parse(answer.stdout)).sort(), ["created_at", "id", "name"])
      }))

    it.effect("a name another organization has (any case) is created and noted on stderr, naming both", () =>
      Effect.gen(function*() {
        const first = JSON.parse((yield* runCommand(["orgs", "create", "--name", "Globex", "--json"])).stdout)
        const again = yield* runCommand(["orgs", "create", "--name", "GLOBEX", "--json"])
        assert.strictEqual(again.code, 0, again.stderr)
        const second = JSON.parse(again.stdout)
        assert.notStrictEqual(second.id, first.id)
        assert.strictEqual(
          again.stderr.trim(),
          `svc: note: "GLOBEX" is also the name of ${first.id}; this organization is ${second.id}`
        )
        assert.strictEqual((yield* named("globex")).length, 2)
      }))

    it.effect("a new name says nothing on stderr", () =>
      Effect.gen(function*() {
        const answer = yield* runCommand(["orgs", "create", "--name", "Initech", "--json"])
        assert.strictEqual(answer.code, 0, answer.stderr)
        assert.strictEqual(answer.stderr, "")
      }))
  })
})
