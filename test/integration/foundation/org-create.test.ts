/**
 * `orgs create --name NAME`: a name another organization has (in any case)
 * is refused with exit status 1 and a message naming the organization that
 * has it and the flag that creates another anyway; `--allow-duplicate-name`
 * creates it. `--json` prints `{"id","name","created_at"}` as before.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { runCommand } from "../../../src/cli/AdminChannel.ts"
import { ConsoleSessions } from "../../../src/console/ConsoleSessions.ts"
import { Identity } from "../../../src/identity/Identity.ts"
import { SvcTest } from "../../../src/testing.ts"

const Services = Layer.mergeAll(Identity.layer, ConsoleSessions.layer, NodeServices.layer).pipe(Layer.provideMerge(SvcTest.layer()))

const named = (name: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ id: string }>`SELECT id FROM orgs WHERE lower(name) = lower(${name})`)

layer(Services, { excludeTestServices: true })("creating an organization", (it) => {
  describe("orgs create --name NAME", () => {
    it.effect("prints one JSON object {id, name, created_at}", () =>
      Effect.gen(function*() {
        const answer = yield* runCommand(["orgs", "create", "--name", "Acme Widgets", "--json"])
        assert.strictEqual(answer.code, 0, answer.stderr)
        assert.deepStrictEqual(Object.keys(JSON.parse(answer.stdout)).sort(), ["created_at", "id", "name"])
      }))

    it.effect("a name another organization has (any case) is refused, exit status 1, naming it and --allow-duplicate-name; nothing is created", () =>
      Effect.gen(function*() {
        const first = JSON.parse((yield* runCommand(["orgs", "create", "--name", "Globex", "--json"])).stdout)
        const again = yield* runCommand(["orgs", "create", "--name", "GLOBEX", "--json"])
        assert.strictEqual(again.code, 1)
        assert.strictEqual(again.stdout, "")
        assert.include(again.stderr, `an organization named "GLOBEX" exists already (${first.id}); pass --allow-duplicate-name to create another`)
        assert.strictEqual((yield* named("globex")).length, 1)
      }))

    it.effect("--allow-duplicate-name creates another of the same name", () =>
      Effect.gen(function*() {
        yield* runCommand(["orgs", "create", "--name", "Initech", "--json"])
        const again = yield* runCommand(["orgs", "create", "--name", "Initech", "--allow-duplicate-name", "--json"])
        assert.strictEqual(again.code, 0, again.stderr)
        assert.strictEqual((yield* named("Initech")).length, 2)
      }))

    it.effect("two creations of one name at once: one organization", () =>
      Effect.gen(function*() {
        const answers = yield* Effect.all(Array.from({ length: 4 }, () => runCommand(["orgs", "create", "--name", "Umbrella", "--json"])), { concurrency: "unbounded" })
        assert.deepStrictEqual(answers.map((answer) => answer.code).sort(), [0, 1, 1, 1])
        assert.strictEqual((yield* named("Umbrella")).length, 1)
      }))
  })
})
