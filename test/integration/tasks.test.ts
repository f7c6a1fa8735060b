import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest } from "../../src/testing.ts"

layer(SvcTest.layer(), { excludeTestServices: true })("tasks and runs", (it) => {
  it.effect("creates a task with its first, empty dataset version", () =>
    Effect.gen(function*() {
      const org = yield* SvcTest.org()
      const task = yield* org.client.tasks.create({
        payload: { name: "triage", answer_schema: { type: "object", properties: { label: { type: "string" } } } }
      })
      const { datasets } = yield* org.client.datasets.listForTask({ params: { task_id: task.id } })
      assert.strictEqual(datasets.length, 1)
      assert.strictEqual(datasets[0]!.version, 1)
      assert.strictEqual(datasets[0]!.example_count, 0)
    }))
})

