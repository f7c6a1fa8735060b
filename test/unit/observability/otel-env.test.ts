/**
 * The OpenTelemetry SDK environment variables that turn
 * on the service's own traces, read as OpenTelemetry's specification defines them.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { type Env, OtelEnvError, parseKeyValues, parseOtelEnv } from "../../../src/observability/OtelEnv.ts"

const PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
const parse = (env: Env) =>
  parseOtelEnv(env, (path) =>
    path === "/ca.pem" ? PEM : (() => {
      throw new Error("ENOENT")
    })())
const refused = (env: Env): string => {
  try {
    parse(env)
  } catch (error) {
    assert.instanceOf(error, OtelEnvError)
    return (error as Error).message
  }
  return assert.fail(`not refused: ${JSON.stringify(env)}`)
}

const BASE = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }

describe("turning the service's own traces on and off", () => {
  it("off when no endpoint is set, when OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none; empty values count as unset", () => {
    assert.isUndefined(parse({}))
    assert.isUndefined(
      parse({ OTEL_EXPORTER_OTLP_ENDPOINT: "", OTEL_SERVICE_NAME: "x", OTEL_TRACES_SAMPLER: "always_on" })
    )
    assert.isUndefined(parse({ ...BASE, OTEL_SDK_DISABLED: "TRUE" }))
    assert.isUndefined(parse({ ...BASE, OTEL_TRACES_EXPORTER: "none" }))
    assert.isDefined(parse({ ...BASE, OTEL_SDK_DISABLED: "false" }))
    assert.isDefined(parse({ ...BASE, OTEL_TRACES_EXPORTER: "otlp" }))
  })

  it("the base endpoint gets v1/traces appended; the traces endpoint is used as is and wins", () => {
    assert.strictEqual(parse(BASE)!.url, "http://collector:4318/v1/traces")
    assert.strictEqual(
      parse({ OTEL_EXPORTER_OTLP_ENDPOINT: "https://c.example/otlp/" })!.url,
      "https://c.example/otlp/v1/traces"
    )
    assert.strictEqual(
      parse({ OTEL_EXPORTER_OTLP_ENDPOINT: "https://c.example/otlp" })!.url,
      "https://c.example/otlp/v1/traces"
    )
    assert.strictEqual(
      parse({ ...BASE, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://traces.example/custom/path" })!.url,
      "https://traces.example/custom/path"
    )
  })

  it("defaults: parentbased_always_on, 10 s timeout, no compression, service.name svc, the batch processor's figures", () => {
    const settings = parse(BASE)!
    assert.deepStrictEqual(settings.sampler, { name: "parentbased_always_on", ratio: 1 })
    assert.strictEqual(settings.timeoutMs, 10_000)
    assert.isFalse(settings.gzip)
    assert.deepStrictEqual(settings.resource, [["service.name", "svc"]])
    assert.deepStrictEqual(
      [settings.scheduleDelayMs, settings.exportTimeoutMs, settings.maxQueueSize, settings.maxExportBatchSize],
      [5000, 30_000, 2048, 512]
    )
    assert.deepStrictEqual(settings.headers, [])
    assert.isUndefined(settings.ca)
  })
})

describe("values", () => {
  it("headers: percent-decoded values, trimmed members, lower-cased names; the traces variable wins", () => {
    const settings = parse({
      ...BASE,
      OTEL_EXPORTER_OTLP_HEADERS: " Authorization = Bearer%20abc%3D%3D , x-tenant=a%2Cb,, "
    })!
    assert.deepStrictEqual(settings.headers, [["authorization", "Bearer abc=="], ["x-tenant", "a,b"]])
    const specific = parse({ ...BASE, OTEL_EXPORTER_OTLP_HEADERS: "a=1", OTEL_EXPORTER_OTLP_TRACES_HEADERS: "b=2" })!
    assert.deepStrictEqual(specific.headers, [["b", "2"]])
  })

  it("resource attributes: percent-decoded; OTEL_SERVICE_NAME wins over service.name", () => {
    const settings = parse({
      ...BASE,
      OTEL_RESOURCE_ATTRIBUTES: "service.name=from-attrs,deployment.environment=prod%20eu"
    })!
    assert.deepStrictEqual(settings.resource, [["service.name", "from-attrs"], ["deployment.environment", "prod eu"]])
    const named = parse({ ...BASE, OTEL_SERVICE_NAME: "svc-eu", OTEL_RESOURCE_ATTRIBUTES: "service.name=from-attrs" })!
    assert.deepStrictEqual(named.resource, [["service.name", "svc-eu"]])
  })

  it("callers' sampled flags add at most SVC_OPERATOR_TRACE_PARENT_RATE traces per second (10 by default; 0 ignores them)", () => {
    assert.strictEqual(parse(BASE)!.callerSampledPerSecond, 10)
    assert.strictEqual(parse({ ...BASE, SVC_OPERATOR_TRACE_PARENT_RATE: "0" })!.callerSampledPerSecond, 0)
    assert.throws(() => parse({ ...BASE, SVC_OPERATOR_TRACE_PARENT_RATE: "-1" }), /SVC_OPERATOR_TRACE_PARENT_RATE/)
  })

  it("samplers and their ratio", () => {
    assert.deepStrictEqual(
      parse({ ...BASE, OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.25" })!.sampler,
      {
        name: "traceidratio",
        ratio: 0.25
      }
    )
    assert.deepStrictEqual(parse({ ...BASE, OTEL_TRACES_SAMPLER: "parentbased_traceidratio" })!.sampler, {
      name: "parentbased_traceidratio",
      ratio: 1
    })
    assert.deepStrictEqual(
      parse({ ...BASE, OTEL_TRACES_SAMPLER: "always_off", OTEL_TRACES_SAMPLER_ARG: "junk" })!.sampler,
      {
        name: "always_off",
        ratio: 1
      }
    )
  })

  it("timeout, compression, certificate and the batch processor from their variables", () => {
    const settings = parse({
      ...BASE,
      OTEL_EXPORTER_OTLP_TIMEOUT: "2500",
      OTEL_EXPORTER_OTLP_TRACES_COMPRESSION: "gzip",
      OTEL_EXPORTER_OTLP_CERTIFICATE: "/ca.pem",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_BSP_SCHEDULE_DELAY: "100",
      OTEL_BSP_MAX_QUEUE_SIZE: "10",
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "5"
    })!
    assert.strictEqual(settings.timeoutMs, 2500)
    assert.isTrue(settings.gzip)
    assert.strictEqual(settings.ca, PEM)
    assert.deepStrictEqual([settings.scheduleDelayMs, settings.maxQueueSize, settings.maxExportBatchSize], [100, 10, 5])
  })

  it("key=value lists: what is percent-encoded comes back exactly, spaces included (property)", () => {
    const key = fc.string({ minLength: 1, maxLength: 12 }).filter((k) => k.trim() === k && k.length > 0)
    fc.assert(fc.property(fc.array(fc.tuple(key, fc.string({ maxLength: 20 })), { maxLength: 6 }), (pairs) => {
      const text = pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join(",")
      const parsed = parseKeyValues("X", text)
      assert.deepStrictEqual(parsed, pairs)
    }))
  })
})

describe("refused at start, naming the variable", () => {
  it("another protocol, exporter or sampler; client certificates", () => {
    for (const protocol of ["grpc", "http/protobuf"]) {
      const message = refused({ ...BASE, OTEL_EXPORTER_OTLP_PROTOCOL: protocol })
      assert.include(message, "OTEL_EXPORTER_OTLP_PROTOCOL")
      assert.include(message, "http/json")
    }
    assert.include(
      refused({ ...BASE, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "grpc" }),
      "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
    )
    assert.include(refused({ ...BASE, OTEL_TRACES_EXPORTER: "zipkin" }), "OTEL_TRACES_EXPORTER")
    assert.include(refused({ ...BASE, OTEL_TRACES_SAMPLER: "jaeger_remote" }), "OTEL_TRACES_SAMPLER")
    assert.include(refused({ ...BASE, OTEL_EXPORTER_OTLP_CLIENT_KEY: "/k.pem" }), "OTEL_EXPORTER_OTLP_CLIENT_KEY")
  })

  it("values that cannot be read; a header value is never shown", () => {
    assert.include(refused({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" }), "OTEL_EXPORTER_OTLP_ENDPOINT")
    assert.include(refused({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "ftp://c/x" }), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    assert.include(refused({ OTEL_EXPORTER_OTLP_ENDPOINT: "https://user:pw@c" }), "must not carry credentials")
    assert.include(
      refused({ ...BASE, OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "1.5" }),
      "OTEL_TRACES_SAMPLER_ARG"
    )
    assert.include(
      refused({ ...BASE, OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "half" }),
      "OTEL_TRACES_SAMPLER_ARG"
    )
    assert.include(refused({ ...BASE, OTEL_EXPORTER_OTLP_TIMEOUT: "10s" }), "OTEL_EXPORTER_OTLP_TIMEOUT")
    assert.include(refused({ ...BASE, OTEL_EXPORTER_OTLP_COMPRESSION: "br" }), "OTEL_EXPORTER_OTLP_COMPRESSION")
    assert.include(
      refused({ ...BASE, OTEL_EXPORTER_OTLP_CERTIFICATE: "/missing.pem" }),
      "OTEL_EXPORTER_OTLP_CERTIFICATE"
    )
    assert.include(refused({ ...BASE, OTEL_RESOURCE_ATTRIBUTES: "novalue" }), "OTEL_RESOURCE_ATTRIBUTES")
    assert.include(refused({ ...BASE, OTEL_RESOURCE_ATTRIBUTES: "a=%zz" }), "percent-encoding")
    assert.include(
      refused({ ...BASE, OTEL_BSP_MAX_QUEUE_SIZE: "4", OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "8" }),
      "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
    )
    assert.include(refused({ ...BASE, OTEL_EXPORTER_OTLP_HEADERS: "bad name=x" }), "OTEL_EXPORTER_OTLP_HEADERS")
    const secret = refused({ ...BASE, OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%0Asecret-value" })
    assert.include(secret, "OTEL_EXPORTER_OTLP_HEADERS")
    assert.notInclude(secret, "secret-value")
  })
})
