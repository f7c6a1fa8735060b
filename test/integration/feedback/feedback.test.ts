import { assert, describe, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import * as fc from "fast-check"
import { REDACTION_MARKER } from "../../../src/feedback/Scrubber.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { SecretStore } from "../../../src/secrets/SecretStore.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"
import { awsSecretEndings, chars, plantings, secretSamples, survivingWindows } from "../../support/secretSamples.ts"

/** A realistic answer schema: an order with line items. */
const orderSchema = {
  type: "object",
  required: ["label", "items"],
  properties: {
    label: { type: "string" },
    notes: { type: "string" },
    token: { type: "string" },
    session: { type: "string" },
    secret_word: { type: "string" },
    password_hint: { type: "string" },
    items: {
      type: "array",
      items: {
        type: "object",
        required: ["sku", "price"],
        properties: { sku: { type: "string" }, price: { type: "number" } }
      }
    }
  }
}

const goodCorrection = { label: "refund", items: [{ sku: "A-1", price: 10 }] }

const setup = (org: TestOrg, schema: Record<string, unknown> = orderSchema) =>
  Effect.gen(function*() {
    const task = yield* org.client.tasks.create({ payload: { name: "orders", answer_schema: schema as never } })
    const run = yield* org.client.tasks.logRun({
      params: { task_id: task.id },
      payload: { input: { ticket: "refund my order" }, answer: { label: "other", items: [] } }
    })
    return { task, run }
  })

const storedCorrections = (orgId: string) =>
  Effect.flatMap(
    SvcTest,
    (svc) =>
      svc.sql<{ correction: unknown }>`SELECT correction FROM feedback WHERE org_id = ${orgId}`.pipe(Effect.orDie)
  )

layer(SvcTest.layer(), { excludeTestServices: true })("feedback on task answers", (it) => {
  describe("POST /v1/feedback records a score on a logged run", () => {
    it.effect("answers 201 with the feedback record; a bare score is `recorded`", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const { task, run } = yield* setup(org)
        const response = yield* raw(`${svc.baseUrl}/v1/feedback`, {
          method: "POST",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify({ inference_log_id: run.trace_id, score: -1 })
        })
        assert.strictEqual(response.status, 201)
        assert.strictEqual(response.json.inference_log_id, run.trace_id)
        assert.strictEqual(response.json.task_id, task.id)
        assert.strictEqual(response.json.score, -1)
        assert.strictEqual(response.json.status, "recorded")
        assert.isNull(response.json.correction)
        assert.notProperty(response.json, "redaction_warning")
        const withCorrection = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: 0, correction: goodCorrection }
        })
        assert.strictEqual(withCorrection.status, "pending")
        assert.deepStrictEqual(withCorrection.correction, goodCorrection)
        // The answer is the record as stored: the same as the list shows it, field for field.
        const listed = new Map((yield* org.client.feedback.list({ query: {} })).feedback.map((item) => [item.id, item]))
        assert.deepStrictEqual(listed.get(withCorrection.id), withCorrection)
        assert.deepStrictEqual(JSON.parse(JSON.stringify(listed.get(response.json.id))), response.json)
      }))

    it.effect("an unknown inference_log_id, or another organization's run: 404", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const other = yield* SvcTest.org()
        const { run } = yield* setup(other)
        for (const id of [run.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736"]) {
          const error = yield* org.client.feedback.submit({ payload: { inference_log_id: id, score: 1 } }).pipe(
            Effect.flip
          )
          assert.strictEqual(error._tag, "NotFound")
        }
      }))

    it.effect("a score outside {1, 0, -1}: 400 naming `score`", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org)
        for (const score of [2, 0.5, "1", null]) {
          const response = yield* raw(`${svc.baseUrl}/v1/feedback`, {
            method: "POST",
            headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
            body: JSON.stringify({ inference_log_id: run.trace_id, score })
          })
          assert.strictEqual(response.status, 400)
          assert.strictEqual(response.json.code, "INVALID_REQUEST")
          assert.strictEqual(response.json.field, "score")
        }
      }))

    it.effect("feedback never changes the run or any dataset", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { task, run } = yield* setup(org)
        const before = yield* org.client.datasets.listForTask({ params: { task_id: task.id }, query: {} })
        yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: -1, correction: goodCorrection }
        })
        const stillRun = yield* org.client.tasks.getRun({ params: { trace_id: run.trace_id } })
        assert.deepStrictEqual(stillRun, run)
        const after = yield* org.client.datasets.listForTask({ params: { task_id: task.id }, query: {} })
        assert.deepStrictEqual(after, before)
      }))

    it.effect("needs feedback.write", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org)
        const reader = yield* org.newKey(["feedback.read"])
        const error = yield* reader.client.feedback.submit({ payload: { inference_log_id: run.trace_id, score: 1 } })
          .pipe(Effect.flip)
        assert.strictEqual(error._tag, "InsufficientScope")
      }))
  })

  describe("the correction is validated against the task's answer JSON Schema", () => {
    it.effect("a mismatch is 422 CORRECTION_SHAPE_MISMATCH naming correction.items[2].price and what was expected", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org)
        const correction = {
          label: "x",
          items: [{ sku: "a", price: 1 }, { sku: "b", price: 2 }, { sku: "c", price: "3" }]
        }
        const response = yield* raw(`${svc.baseUrl}/v1/feedback`, {
          method: "POST",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify({ inference_log_id: run.trace_id, score: -1, correction })
        })
        assert.strictEqual(response.status, 422)
        assert.strictEqual(response.headers.get("content-type"), "application/problem+json")
        assert.strictEqual(response.json.code, "CORRECTION_SHAPE_MISMATCH")
        assert.strictEqual(response.json.field, "correction.items[2].price")
        assert.match(response.json.detail, /number/)
        const error = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: -1, correction }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "CorrectionShapeMismatch")
      }))

    it.effect("every violation is listed; a missing member is named by its path", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org)
        const error = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: -1, correction: { label: 3, items: [{ sku: "a" }] } }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "CorrectionShapeMismatch")
        if (error._tag === "CorrectionShapeMismatch") {
          assert.sameMembers(error.errors.map((e) => e.field), ["correction.label", "correction.items[0].price"])
        }
        assert.strictEqual((yield* storedCorrections(org.orgId)).length, 0)
      }))

    it.effect("a secret used as an unexpected member name is not repeated in the 422", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org, {
          type: "object",
          additionalProperties: false,
          properties: { a: { type: "string" } }
        })
        const github = secretSamples().find((s) => s.rule === "@secretlint/secretlint-rule-github")!.secret
        for (const name of [github, org.key]) {
          const error = yield* org.client.feedback.submit({
            payload: { inference_log_id: run.trace_id, score: -1, correction: { [name]: "x" } }
          }).pipe(Effect.flip)
          assert.strictEqual(error._tag, "CorrectionShapeMismatch")
          if (error._tag === "CorrectionShapeMismatch") assert.include(error.field, REDACTION_MARKER)
          assert.notInclude(JSON.stringify(error), name)
        }
      }))

    it.effect("a secret stored after earlier feedback, used as an unexpected member name, is not repeated in the 422", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org, {
          type: "object",
          additionalProperties: false,
          properties: { a: { type: "string" } }
        })
        yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: -1, correction: { a: "warm any credential cache" } }
        })
        const store = yield* Effect.gen(function*() {
          return yield* SecretStore
        }).pipe(Effect.provide(SecretStore.layer))
        const secret = chars("abcdefghijklmnopqrstuvwxyz", 24, 14)
        yield* store.put(
          { orgId: org.orgId, kind: "notification_endpoint", id: newId() },
          "signing_secret",
          Redacted.make(secret)
        )
        const error = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: -1, correction: { [secret]: "x" } }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "CorrectionShapeMismatch")
        assert.notInclude(JSON.stringify(error), secret)
      }))

    it.effect("draft-07 schemas work too (definitions, $ref)", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org, {
          $schema: "http://json-schema.org/draft-07/schema#",
          type: "object",
          definitions: { code: { type: "string", pattern: "^[A-Z]{3}$" } },
          properties: { code: { $ref: "#/definitions/code" } },
          required: ["code"]
        })
        const ok = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: 1, correction: { code: "ABC" } }
        })
        assert.strictEqual(ok.status, "pending")
        const error = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: 1, correction: { code: "abc" } }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "CorrectionShapeMismatch")
        if (error._tag === "CorrectionShapeMismatch") assert.strictEqual(error.field, "correction.code")
      }))

    it.effect("member names that are not identifiers are quoted in brackets", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org, { type: "object", properties: { "unit price": { type: "number" } } })
        const error = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: 1, correction: { "unit price": "x" } }
        }).pipe(Effect.flip)
        if (error._tag === "CorrectionShapeMismatch") assert.strictEqual(error.field, "correction[\"unit price\"]")
        else assert.fail(error._tag)
      }))
  })

  describe("protected values are removed before saving", () => {
    it.effect("the organization's API keys (revoked too), signing secrets and collector header values, whole or embedded", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org)
        const revoked = yield* org.newKey(["tasks.read"])
        yield* svc.sql`UPDATE api_keys SET revoked_at = now() WHERE id = ${revoked.keyId}`
        const store = yield* Effect.gen(function*() {
          return yield* SecretStore
        }).pipe(Effect.provide(SecretStore.layer))
        const signing = `whsec_${chars("abcdefghijklmnopqrstuvwxyz0123456789", 43, 3)}`
        const collector = chars("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 30, 5)
        yield* store.put(
          { orgId: org.orgId, kind: "notification_endpoint", id: newId() },
          "signing_secret",
          Redacted.make(signing)
        )
        yield* store.put(
          { orgId: org.orgId, kind: "telemetry_destination", id: newId() },
          "authorization",
          Redacted.make(`Bearer ${collector}`)
        )
        const correction = {
          label: org.key,
          notes: `use ${revoked.key} or sign with ${signing}; collector token ${collector}`,
          items: [{ sku: `Bearer ${collector}`, price: 1 }]
        }
        const item = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: -1, correction }
        })
        assert.deepStrictEqual(item.redaction_warning?.fields, [
          "correction.label",
          "correction.notes",
          "correction.items[0].sku"
        ])
        assert.isString(item.redaction_warning?.message)
        const body = JSON.stringify(item)
        const stored = JSON.stringify(yield* storedCorrections(org.orgId))
        for (const secret of [org.key, revoked.key, signing, collector]) {
          assert.notInclude(body, secret)
          assert.notInclude(stored, secret)
        }
        assert.strictEqual((item.correction as { label: string }).label, REDACTION_MARKER)
        assert.include(stored, REDACTION_MARKER)
        const logs = svc.logLines().join("\n")
        for (const secret of [revoked.key, signing, collector]) assert.notInclude(logs, secret)
        // The warning is kept with the record.
        const listed = yield* org.client.feedback.list({ query: { task_id: item.task_id } })
        assert.deepStrictEqual(listed.feedback[0]!.redaction_warning, item.redaction_warning)
      }))

    it.effect("a key or secret created after earlier feedback is scrubbed from the very next correction", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org)
        const submit = (notes: string) =>
          org.client.feedback.submit({
            payload: { inference_log_id: run.trace_id, score: -1, correction: { ...goodCorrection, notes } }
          })
        yield* submit("first, to warm any cache")
        const fresh = yield* org.newKey(["feedback.read"])
        const afterKey = yield* submit(`new key ${fresh.key}`)
        assert.notInclude(JSON.stringify(afterKey), fresh.key)
        const store = yield* Effect.gen(function*() {
          return yield* SecretStore
        }).pipe(Effect.provide(SecretStore.layer))
        const secret = chars("abcdefghijklmnopqrstuvwxyz", 24, 9)
        yield* store.put(
          { orgId: org.orgId, kind: "notification_endpoint", id: newId() },
          "signing_secret",
          Redacted.make(secret)
        )
        const afterSecret = yield* submit(`secret ${secret}`)
        assert.deepStrictEqual(afterSecret.redaction_warning?.fields, ["correction.notes"])
        assert.notInclude(JSON.stringify(afterSecret), secret)
        assert.notInclude(JSON.stringify(yield* storedCorrections(org.orgId)), secret)
      }))

    it.effect("the organization's credentials version moves with every key or secret change, whoever writes; not with revocation", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const version = Effect.map(
          svc.sql<{ v: string }>`SELECT credentials_version::text AS v FROM orgs WHERE id = ${org.orgId}`,
          (rows) => Number(rows[0]!.v)
        )
        const store = yield* Effect.gen(function*() {
          return yield* SecretStore
        }).pipe(Effect.provide(SecretStore.layer))
        const v0 = yield* version
        const key = yield* org.newKey(["feedback.read"])
        const v1 = yield* version
        assert.isAbove(v1, v0, "a new key")
        yield* key.revoke
        assert.strictEqual(yield* version, v1, "revocation keeps it")
        const owner = { orgId: org.orgId, kind: "notification_endpoint" as const, id: newId() }
        const secretId = yield* store.put(
          owner,
          "signing_secret",
          Redacted.make(chars("abcdefghijklmnopqrstuvwxyz", 24, 13))
        )
        const v2 = yield* version
        assert.isAbove(v2, v1, "a new secret")
        yield* svc.sql`UPDATE org_secrets SET sealed = sealed WHERE id = ${secretId}`
        const v3 = yield* version
        assert.isAbove(v3, v2, "a secret changed in place")
        yield* store.removeOwner(owner)
        assert.isAbove(yield* version, v3, "a removed secret")
      }))

    it.effect("a secret that replaces a removed one is scrubbed, even when it was written in a transaction that began earlier", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org)
        const store = yield* Effect.gen(function*() {
          return yield* SecretStore
        }).pipe(Effect.provide(SecretStore.layer))
        const submit = (notes: string) =>
          org.client.feedback.submit({
            payload: { inference_log_id: run.trace_id, score: -1, correction: { ...goodCorrection, notes } }
          })
        const oldOwner = { orgId: org.orgId, kind: "notification_endpoint" as const, id: newId() }
        const oldSecretId = yield* store.put(
          oldOwner,
          "signing_secret",
          Redacted.make(chars("abcdefghijklmnopqrstuvwxyz", 24, 11))
        )
        yield* submit("warm any credential cache")
        // The endpoint is deleted and another created in a transaction that
        // started before the old secret was written (its created_at, now(),
        // is the older instant): same count, same newest created_at.
        const [old] = yield* svc.sql<{ created_at: Date }>`SELECT created_at FROM org_secrets WHERE id = ${oldSecretId}`
        yield* store.removeOwner(oldOwner)
        const secret = chars("abcdefghijklmnopqrstuvwxyz", 24, 12)
        const newSecretId = yield* store.put(
          { orgId: org.orgId, kind: "notification_endpoint", id: newId() },
          "signing_secret",
          Redacted.make(secret)
        )
        yield* svc.sql`UPDATE org_secrets SET created_at = ${old!.created_at} WHERE id = ${newSecretId}`
        const item = yield* submit(`sign with ${secret}`)
        assert.notInclude(JSON.stringify(item), secret)
        assert.notInclude(JSON.stringify(yield* storedCorrections(org.orgId)), secret)
      }))

    it.effect("recognizable secrets are removed; only the secret substring is replaced", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org)
        const samples = secretSamples(21).filter((s) => !s.text.includes("\n"))
        const correction = {
          label: "refund",
          notes: samples.map((s) => s.text).join(" | "),
          items: [{ sku: "A-1", price: 1 }]
        }
        const item = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: -1, correction }
        })
        const notes = (item.correction as { notes: string }).notes
        for (const sample of samples) assert.notInclude(notes, sample.secret)
        assert.isTrue(notes.startsWith("value: [REDACTED] end"))
        assert.deepStrictEqual(item.redaction_warning?.fields, ["correction.notes"])
      }))

    it.effect("ordinary fields named token, session, secret_word, password_hint keep their values", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org)
        const correction = {
          ...goodCorrection,
          token: "abc-123",
          session: "sess_42",
          secret_word: "banana",
          password_hint: "first pet"
        }
        const item = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: 1, correction }
        })
        assert.deepStrictEqual(item.correction, correction)
        assert.isUndefined(item.redaction_warning)
      }))

    it.effect("a field named token whose value is a recognizable secret is scrubbed", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org)
        const jwt = secretSamples().find((s) => s.rule === "jwt")!
        const item = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: 1, correction: { ...goodCorrection, token: jwt.secret } }
        })
        assert.strictEqual((item.correction as { token: string }).token, REDACTION_MARKER)
        assert.deepStrictEqual(item.redaction_warning?.fields, ["correction.token"])
      }))

    it.effect("an AWS secret access key in its assignment forms and as a named member leaves no 12 characters of itself", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org, { type: "object" })
        for (
          const planting of [...plantings(), ...awsSecretEndings()].filter((p) =>
            p.rule.includes("aws") && p.forms.length > 1
          )
        ) {
          const correction = {
            ...goodCorrection,
            pasted: planting.forms,
            credentials: { aws_secret_access_key: planting.secret }
          }
          const item = yield* org.client.feedback.submit({
            payload: { inference_log_id: run.trace_id, score: 1, correction }
          })
          assert.deepStrictEqual(survivingWindows(JSON.stringify(item.correction), planting.secret), [])
          const stored = (yield* org.client.feedback.list({ query: {} })).feedback
          assert.deepStrictEqual(survivingWindows(JSON.stringify(stored), planting.secret), [])
          assert.include(JSON.stringify(item.correction), "AWS_SECRET_ACCESS_KEY=[REDACTED]")
        }
      }))

    it.effect("property: planted secrets never survive in what is stored or returned; clean documents pass unchanged", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org, { type: "object" })
        const samples = secretSamples(31)
        const planted: ReadonlyArray<readonly [string, string]> = [...samples.map((s) => [s.text, s.secret] as const), [
          org.key,
          org.key
        ]]
        const word = fc.stringMatching(/^[a-z]{1,8}$/)
        const doc = fc.letrec<{ v: unknown }>((tie) => ({
          v: fc.oneof(
            { depthSize: "small" },
            word,
            fc.integer(),
            fc.array(tie("v"), { maxLength: 3 }),
            fc.dictionary(word, tie("v"), { maxKeys: 3 })
          )
        })).v
        const cases = fc.sample(
          fc.tuple(
            fc.dictionary(word, doc, { maxKeys: 3 }),
            fc.constantFrom(...planted),
            fc.array(word, { minLength: 1, maxLength: 4 })
          ),
          { numRuns: 12, seed: 42 }
        )
        for (const [base, [text, secret], path] of cases) {
          // Plant at a random depth: nest the text under the generated path.
          const nested = path.reduceRight<unknown>((inner, key) => ({ [key]: inner }), `see ${text} now`)
          const correction = { ...base, planted: nested } as unknown as Record<string, never>
          const item = yield* org.client.feedback.submit({
            payload: { inference_log_id: run.trace_id, score: 0, correction }
          })
          assert.notInclude(JSON.stringify(item), secret)
          assert.isAbove(item.redaction_warning?.fields.length ?? 0, 0)
          const clean = yield* org.client.feedback.submit({
            payload: { inference_log_id: run.trace_id, score: 0, correction: base as never }
          })
          assert.deepStrictEqual(clean.correction, base)
          assert.isUndefined(clean.redaction_warning)
        }
        const stored = JSON.stringify(yield* storedCorrections(org.orgId))
        for (const [, secret] of planted) assert.notInclude(stored, secret)
      }))
  })

  describe("a correction that no longer fits once secrets are removed is refused", () => {
    it.effect("pattern, minLength or format broken by the marker: 422 CORRECTION_CONTAINS_SECRET naming the field; nothing saved", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org, {
          type: "object",
          properties: {
            api_token: { type: "string", pattern: "^[A-Za-z0-9_]{40}$" },
            site: { type: "string", format: "uri" },
            long: { type: "string", minLength: 40 },
            ok: { type: "string" }
          }
        })
        const github = secretSamples().find((s) => s.rule === "@secretlint/secretlint-rule-github")!.secret
        const error = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: -1, correction: { api_token: github, ok: "fine" } }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "CorrectionContainsSecret")
        if (error._tag === "CorrectionContainsSecret") {
          assert.strictEqual(error.field, "correction.api_token")
          assert.strictEqual(error.code, "CORRECTION_CONTAINS_SECRET")
          assert.notInclude(JSON.stringify(error), github)
        }
        const basicAuth = secretSamples().find((s) => s.rule === "@secretlint/secretlint-rule-basicauth")!.secret
        const jwt = secretSamples().find((s) => s.rule === "jwt")!.secret
        for (
          const [correction, field] of [
            [{ site: basicAuth }, "correction.site"],
            [{ long: jwt }, "correction.long"]
          ] as const
        ) {
          const refused = yield* org.client.feedback.submit({
            payload: { inference_log_id: run.trace_id, score: -1, correction }
          }).pipe(Effect.flip)
          assert.strictEqual(refused._tag, "CorrectionContainsSecret")
          if (refused._tag === "CorrectionContainsSecret") assert.strictEqual(refused.field, field)
        }
        assert.strictEqual((yield* storedCorrections(org.orgId)).length, 0)
        // With a safe example value it is accepted.
        const ok = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: -1, correction: { api_token: "x".repeat(40), ok: "fine" } }
        })
        assert.strictEqual(ok.status, "pending")
      }))
  })

  describe("review moves pending corrections to staged or rejected", () => {
    it.effect("stage and reject (200 with the item); any other transition is 409 INVALID_TRANSITION", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { run } = yield* setup(org)
        const submit = () =>
          org.client.feedback.submit({
            payload: { inference_log_id: run.trace_id, score: -1, correction: goodCorrection }
          })
        const a = yield* submit()
        const b = yield* submit()
        const bare = yield* org.client.feedback.submit({ payload: { inference_log_id: run.trace_id, score: 1 } })
        const staged = yield* org.client.feedback.stage({ params: { feedback_id: a.id } })
        assert.strictEqual(staged.status, "staged")
        const rejected = yield* org.client.feedback.reject({ params: { feedback_id: b.id } })
        assert.strictEqual(rejected.status, "rejected")
        const attempts = [
          org.client.feedback.stage({ params: { feedback_id: a.id } }),
          org.client.feedback.reject({ params: { feedback_id: a.id } }),
          org.client.feedback.stage({ params: { feedback_id: b.id } }),
          org.client.feedback.stage({ params: { feedback_id: bare.id } }),
          org.client.feedback.reject({ params: { feedback_id: bare.id } })
        ]
        for (const attempt of attempts) {
          const error = yield* Effect.flip(attempt)
          assert.strictEqual(error._tag, "InvalidTransition")
        }
      }))

    it.effect("another organization's feedback: 404; a key without feedback.write: 403", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const other = yield* SvcTest.org()
        const { run } = yield* setup(org)
        const item = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: -1, correction: goodCorrection }
        })
        const error = yield* other.client.feedback.stage({ params: { feedback_id: item.id } }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "NotFound")
        const reader = yield* org.newKey(["feedback.read"])
        const denied = yield* reader.client.feedback.reject({ params: { feedback_id: item.id } }).pipe(Effect.flip)
        assert.strictEqual(denied._tag, "InsufficientScope")
      }))
  })

  describe("GET /v1/feedback lists with task_id, status, limit and cursor", () => {
    it.effect("newest first; filters; nothing skipped or repeated across pages while feedback arrives", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { task, run } = yield* setup(org)
        const second = yield* setup(org)
        const ids: Array<string> = []
        for (let i = 0; i < 7; i++) {
          ids.push(
            (yield* org.client.feedback.submit({
              payload: { inference_log_id: run.trace_id, score: 1, correction: goodCorrection }
            })).id
          )
        }
        yield* org.client.feedback.submit({ payload: { inference_log_id: second.run.trace_id, score: 1 } })
        yield* org.client.feedback.stage({ params: { feedback_id: ids[2]! } })
        const seen: Array<string> = []
        let cursor: string | undefined
        let pages = 0
        do {
          const page = yield* org.client.feedback.list({
            query: { task_id: task.id, limit: 3, ...(cursor ? { cursor } : {}) }
          })
          seen.push(...page.feedback.map((f) => f.id))
          cursor = page.next_cursor ?? undefined
          if (pages++ === 0) {
            yield* org.client.feedback.submit({ payload: { inference_log_id: run.trace_id, score: 0 } })
          }
        } while (cursor !== undefined)
        assert.deepStrictEqual(seen, [...ids].reverse())
        const staged = yield* org.client.feedback.list({ query: { status: "staged" } })
        assert.deepStrictEqual(staged.feedback.map((f) => f.id), [ids[2]])
        const recorded = yield* org.client.feedback.list({ query: { status: "recorded", task_id: second.task.id } })
        assert.strictEqual(recorded.feedback.length, 1)
        const other = yield* SvcTest.org()
        assert.deepStrictEqual((yield* other.client.feedback.list({ query: {} })).feedback, [])
      }))

    it.effect("a cursor we did not issue or an unknown status: 400; needs feedback.read", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const error = yield* org.client.feedback.list({ query: { cursor: "nope" } }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "InvalidRequest")
        const bad = yield* raw(`${svc.baseUrl}/v1/feedback?status=done`, {
          headers: { authorization: `Bearer ${org.key}` }
        })
        assert.strictEqual(bad.status, 400)
        assert.strictEqual(bad.json.field, "status")
        const writer = yield* org.newKey(["feedback.write"])
        const denied = yield* writer.client.feedback.list({ query: {} }).pipe(Effect.flip)
        assert.strictEqual(denied._tag, "InsufficientScope")
      }))
  })

  describe("preview and promote staged corrections into a new dataset version", () => {
    const staged = (org: TestOrg, count: number) =>
      Effect.gen(function*() {
        const { task, run } = yield* setup(org)
        const ids: Array<string> = []
        for (let i = 0; i < count; i++) {
          const item = yield* org.client.feedback.submit({
            payload: {
              inference_log_id: run.trace_id,
              score: -1,
              correction: { label: `fixed-${i}`, items: [{ sku: `S-${i}`, price: i }] }
            }
          })
          yield* org.client.feedback.stage({ params: { feedback_id: item.id } })
          ids.push(item.id)
        }
        return { task, run, ids }
      })

    it.effect("promote creates the next version = base examples + staged corrections (run input, corrected answer); they become promoted", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { task, ids } = yield* staged(org, 2)
        const preview = yield* org.client.feedback.promotePreview({ params: { task_id: task.id }, query: {} })
        assert.deepStrictEqual(preview.staged.map((f) => f.id), ids)
        const first = yield* org.client.feedback.promote({
          params: { task_id: task.id },
          payload: {
            base_dataset_id: preview.base_dataset_id,
            expected_feedback_revision: preview.expected_feedback_revision
          }
        })
        assert.strictEqual(first.version, 2)
        assert.strictEqual(first.promoted_count, 2)
        const v2 = yield* org.client.datasets.get({ params: { dataset_id: first.dataset_id }, query: {} })
        assert.deepStrictEqual(v2.examples, [
          {
            input: { ticket: "refund my order" },
            answer: { label: "fixed-0", items: [{ sku: "S-0", price: 0 }] },
            feedback_id: ids[0]!
          },
          {
            input: { ticket: "refund my order" },
            answer: { label: "fixed-1", items: [{ sku: "S-1", price: 1 }] },
            feedback_id: ids[1]!
          }
        ])
        const promoted = yield* org.client.feedback.list({ query: { task_id: task.id, status: "promoted" } })
        assert.sameMembers(promoted.feedback.map((f) => f.id), ids)

        // A second round builds on version 2; version 1 and 2 stay as they were.
        const run2 = yield* org.client.tasks.logRun({
          params: { task_id: task.id },
          payload: { input: { ticket: "second" }, answer: { label: "x", items: [] } }
        })
        const next = yield* org.client.feedback.submit({
          payload: { inference_log_id: run2.trace_id, score: -1, correction: goodCorrection }
        })
        yield* org.client.feedback.stage({ params: { feedback_id: next.id } })
        const preview2 = yield* org.client.feedback.promotePreview({ params: { task_id: task.id }, query: {} })
        assert.strictEqual(preview2.base_dataset_id, first.dataset_id)
        const second = yield* org.client.feedback.promote({
          params: { task_id: task.id },
          payload: {
            base_dataset_id: preview2.base_dataset_id,
            expected_feedback_revision: preview2.expected_feedback_revision
          }
        })
        assert.strictEqual(second.version, 3)
        const v3 = yield* org.client.datasets.get({ params: { dataset_id: second.dataset_id }, query: {} })
        assert.deepStrictEqual(v3.examples.slice(0, 2), v2.examples)
        assert.deepStrictEqual(v3.examples[2], {
          input: { ticket: "second" },
          answer: goodCorrection,
          feedback_id: next.id
        })
        assert.deepStrictEqual(
          yield* org.client.datasets.get({ params: { dataset_id: first.dataset_id }, query: {} }),
          v2
        )
        const { datasets } = yield* org.client.datasets.listForTask({ params: { task_id: task.id }, query: {} })
        assert.deepStrictEqual(datasets.map((d) => [d.version, d.example_count]), [[1, 0], [2, 2], [3, 3]])
        const v1 = yield* org.client.datasets.get({ params: { dataset_id: datasets[0]!.id }, query: {} })
        assert.deepStrictEqual(v1.examples, [])
      }))

    it.effect("the revision changes whenever the staged set changes; stale revision: 409 FEEDBACK_CHANGED", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { task, run } = yield* staged(org, 1)
        const preview = yield* org.client.feedback.promotePreview({ params: { task_id: task.id }, query: {} })
        const more = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: -1, correction: goodCorrection }
        })
        const unchanged = yield* org.client.feedback.promotePreview({ params: { task_id: task.id }, query: {} })
        assert.strictEqual(unchanged.expected_feedback_revision, preview.expected_feedback_revision)
        yield* org.client.feedback.stage({ params: { feedback_id: more.id } })
        const changed = yield* org.client.feedback.promotePreview({ params: { task_id: task.id }, query: {} })
        assert.notStrictEqual(changed.expected_feedback_revision, preview.expected_feedback_revision)
        const error = yield* org.client.feedback.promote({
          params: { task_id: task.id },
          payload: {
            base_dataset_id: preview.base_dataset_id,
            expected_feedback_revision: preview.expected_feedback_revision
          }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "FeedbackChanged")
        const { datasets } = yield* org.client.datasets.listForTask({ params: { task_id: task.id }, query: {} })
        assert.strictEqual(datasets.length, 1)
        const stillStaged = yield* org.client.feedback.list({ query: { task_id: task.id, status: "staged" } })
        assert.strictEqual(stillStaged.feedback.length, 2)
      }))

    it.effect("stale base: 409 DATASET_BASE_CHANGED; nothing staged: 409 NOTHING_STAGED", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const { task } = yield* staged(org, 1)
        const preview = yield* org.client.feedback.promotePreview({ params: { task_id: task.id }, query: {} })
        yield* org.client.feedback.promote({
          params: { task_id: task.id },
          payload: {
            base_dataset_id: preview.base_dataset_id,
            expected_feedback_revision: preview.expected_feedback_revision
          }
        })
        const stale = yield* org.client.feedback.promote({
          params: { task_id: task.id },
          payload: {
            base_dataset_id: preview.base_dataset_id,
            expected_feedback_revision: preview.expected_feedback_revision
          }
        }).pipe(Effect.flip)
        assert.strictEqual(stale._tag, "DatasetBaseChanged")
        const empty = yield* org.client.feedback.promotePreview({ params: { task_id: task.id }, query: {} })
        assert.deepStrictEqual(empty.staged, [])
        const response = yield* raw(`${svc.baseUrl}/v1/tasks/${task.id}/feedback/promote`, {
          method: "POST",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify({
            base_dataset_id: empty.base_dataset_id,
            expected_feedback_revision: empty.expected_feedback_revision
          })
        })
        assert.strictEqual(response.status, 409)
        assert.strictEqual(response.json.code, "NOTHING_STAGED")
      }))

    it.effect("promote needs datasets.write; another organization's task: 404", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { task } = yield* staged(org, 1)
        const preview = yield* org.client.feedback.promotePreview({ params: { task_id: task.id }, query: {} })
        const payload = {
          base_dataset_id: preview.base_dataset_id,
          expected_feedback_revision: preview.expected_feedback_revision
        }
        const reviewer = yield* org.newKey(["feedback.read", "feedback.write"])
        const denied = yield* reviewer.client.feedback.promote({ params: { task_id: task.id }, payload }).pipe(
          Effect.flip
        )
        assert.strictEqual(denied._tag, "InsufficientScope")
        const other = yield* SvcTest.org()
        const missing = yield* other.client.feedback.promote({ params: { task_id: task.id }, payload }).pipe(
          Effect.flip
        )
        assert.strictEqual(missing._tag, "NotFound")
        const missingPreview = yield* other.client.feedback.promotePreview({ params: { task_id: task.id }, query: {} })
          .pipe(Effect.flip)
        assert.strictEqual(missingPreview._tag, "NotFound")
      }))

    it.effect("two concurrent promotes with the same preview: exactly one succeeds, the other gets a 409; nothing promoted twice", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        for (let round = 0; round < 3; round++) {
          const { task, ids } = yield* staged(org, 3)
          const preview = yield* org.client.feedback.promotePreview({ params: { task_id: task.id }, query: {} })
          const payload = {
            base_dataset_id: preview.base_dataset_id,
            expected_feedback_revision: preview.expected_feedback_revision
          }
          const results = yield* Effect.all(
            [0, 1, 2].map(() => Effect.result(org.client.feedback.promote({ params: { task_id: task.id }, payload }))),
            { concurrency: "unbounded" }
          )
          const wins = results.filter((r) => r._tag === "Success")
          const losses = results.filter((r) => r._tag === "Failure")
          assert.strictEqual(wins.length, 1)
          assert.strictEqual(losses.length, 2)
          for (const loss of losses) {
            if (loss._tag === "Failure") {
              assert.include(["DatasetBaseChanged", "FeedbackChanged", "NothingStaged"], loss.failure._tag)
            }
          }
          const rows = yield* svc.sql<{ feedback_id: string }>`
            SELECT e.feedback_id FROM dataset_examples e JOIN datasets d ON d.id = e.dataset_id
            WHERE d.task_id = ${task.id} AND e.feedback_id IS NOT NULL`
          assert.sameMembers(rows.map((r) => r.feedback_id), ids)
          const { datasets } = yield* org.client.datasets.listForTask({ params: { task_id: task.id }, query: {} })
          assert.strictEqual(datasets.length, 2)
        }
      }))
  })
})
