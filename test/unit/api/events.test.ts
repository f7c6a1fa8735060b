/**
 * The event catalogue has one source, src/api/Events.ts: the OpenAPI
 * document's `webhooks` list every event type with its body schema and
 * the signature headers; docs/events.md has a section per type whose JSON
 * Schema is the generated one and whose example fits it; the receiver
 * kit's types are the schemas' types. What svc really sends is checked
 * against all of it by test/integration/webhooks/catalogue.test.ts.
 */
import { assert, describe, expectTypeOf, it } from "@effect/vitest"
import { OpenApi } from "effect/http-api"
import type * as Kit from "../../../packages/receiver/src/index.ts"
import { Api } from "../../../src/api/Api.ts"
import type { ApprovalSnapshot } from "../../../src/api/Approvals.ts"
import {
  type ApprovalEvent,
  DeliveryHeaders,
  type EndpointEvent,
  type EndpointSnapshot,
  eventJsonSchema,
  EventSchemas,
  type WebhookEvent
} from "../../../src/api/Events.ts"
import { EventTypes } from "../../../src/api/Notifications.ts"
import { catalogue, eventValidators } from "../../support/eventCatalogue.ts"
import { read } from "../../support/markdown.ts"

describe("the OpenAPI document's webhooks", () => {
  const spec = OpenApi.fromApi(Api) as Record<string, any>

  it("list exactly the event types, in order", () => {
    assert.deepStrictEqual(Object.keys(spec.webhooks), [...EventTypes])
  })

  it("each is a POST of its event's JSON Schema with the signature headers", () => {
    for (const type of EventTypes) {
      const post = spec.webhooks[type].post
      const ref: string = post.requestBody.content["application/json"].schema.$ref
      assert.deepStrictEqual(
        spec.components.schemas[ref.replace("#/components/schemas/", "")],
        eventJsonSchema(type),
        type
      )
      assert.deepStrictEqual(
        post.parameters.map((p: { name: string; in: string; required: boolean }) => [p.name, p.in, p.required]),
        DeliveryHeaders.map((header) => [header.name, "header", true]),
        type
      )
      assert.property(post.responses, "2XX")
    }
  })
})

describe("docs/events.md", () => {
  const { entries, testExample, headers } = catalogue()
  const problemsOf = eventValidators()

  it("has a section per event type whose JSON Schema is the generated one", () => {
    assert.sameMembers([...entries.keys()], [...EventTypes])
    for (const type of EventTypes) {
      assert.deepStrictEqual(
        entries.get(type)!.schema,
        eventJsonSchema(type),
        `${type}: regenerate the schema block from src/api/Events.ts`
      )
    }
  })

  it("each example is of its type and fits its schema, with no field the schema does not name", () => {
    for (const type of EventTypes) {
      const { example } = entries.get(type)!
      assert.strictEqual(example.type, type)
      assert.isUndefined(example.test)
      assert.deepStrictEqual(problemsOf(type, example), [], type)
    }
    assert.strictEqual(testExample.test, true)
    assert.deepStrictEqual(problemsOf(testExample.type, testExample), [], "the test event")
  })

  it("the check sees a body that does not fit: a wrong status, a missing field, an unnamed field", () => {
    const { example } = entries.get("approval.approved")!
    assert.isNotEmpty(
      problemsOf("approval.approved", { ...example, approval: { ...example.approval, status: "pending" } })
    )
    const { decided_by: _, ...undecided } = example.approval
    assert.isNotEmpty(problemsOf("approval.approved", { ...example, approval: undecided }))
    assert.isNotEmpty(problemsOf("approval.approved", { ...example, extra: 1 }))
  })

  it("lists the headers svc sends", () => {
    assert.deepStrictEqual(
      [...headers].sort(),
      ["content-type", "user-agent", ...DeliveryHeaders.map((header) => header.name.toLowerCase())].sort()
    )
  })

  it("is linked from the webhooks page and the README", () => {
    assert.include(read("docs/webhooks.md"), "(events.md)")
    assert.include(read("README.md"), "(docs/events.md)")
  })
})

/** A type without its index signature: the fields it names. */
type Named<T> = { [K in keyof T as string extends K ? never : K]: T[K] }

describe("the receiver kit's types are the schemas' types", () => {
  it("the snapshots name the same fields with the same types", () => {
    expectTypeOf<Named<Kit.ApprovalSnapshot>>().toEqualTypeOf<ApprovalSnapshot>()
    expectTypeOf<Named<Kit.EndpointSnapshot>>().toEqualTypeOf<EndpointSnapshot>()
  })

  it("the events have the same envelope", () => {
    expectTypeOf<Omit<Kit.ApprovalEvent, "approval">>().toEqualTypeOf<Omit<ApprovalEvent, "approval">>()
    expectTypeOf<Omit<Kit.EndpointEvent, "endpoint">>().toEqualTypeOf<Omit<EndpointEvent, "endpoint">>()
    expectTypeOf<Kit.WebhookEventType>().toEqualTypeOf<WebhookEvent["type"]>()
  })

  it("every body svc sends is a kit event, and narrowing on type finds its member", () => {
    expectTypeOf<WebhookEvent>().toExtend<Kit.WebhookEvent>()
    expectTypeOf<typeof EventSchemas["approval.approved"]["Type"]>().toExtend<Kit.ApprovalEvent>()
    expectTypeOf<typeof EventSchemas["endpoint.failing"]["Type"]>().toExtend<Kit.EndpointEvent>()
  })
})
