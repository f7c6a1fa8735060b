/**
 * OTLP/HTTP protobuf for traces: the `ExportTraceServiceRequest` svc builds
 * in its JSON form (`Encoding.ts`) written as protobuf by protobufjs, and
 * the collector's `ExportTraceServiceResponse` read back.
 *
 * The message definitions below are those of opentelemetry-proto
 * (`collector/trace/v1/trace_service.proto`, `trace/v1/trace.proto`,
 * `common/v1/common.proto`, `resource/v1/resource.proto`), reduced to the
 * fields svc writes or reads, with their numbers and types unchanged; names
 * are the JSON mapping's lowerCamelCase so the JSON form is the message.
 * The only mapping to make by hand is OTLP/JSON's exception to the protobuf
 * JSON mapping: trace and span ids are hex, where protobuf holds bytes.
 * 64-bit integers stay decimal strings (protobufjs reads them with `long`),
 * enums are already numbers.
 */
import protobuf from "protobufjs/light.js"

const keyValues = { rule: "repeated", type: "opentelemetry.proto.common.v1.KeyValue" } as const

const root = protobuf.Root.fromJSON({
  nested: {
    opentelemetry: {
      nested: {
        proto: {
          nested: {
            common: {
              nested: {
                v1: {
                  nested: {
                    AnyValue: {
                      oneofs: {
                        value: {
                          oneof: [
                            "stringValue",
                            "boolValue",
                            "intValue",
                            "doubleValue",
                            "arrayValue",
                            "kvlistValue",
                            "bytesValue"
                          ]
                        }
                      },
                      fields: {
                        stringValue: { type: "string", id: 1 },
                        boolValue: { type: "bool", id: 2 },
                        intValue: { type: "int64", id: 3 },
                        doubleValue: { type: "double", id: 4 },
                        arrayValue: { type: "ArrayValue", id: 5 },
                        kvlistValue: { type: "KeyValueList", id: 6 },
                        bytesValue: { type: "bytes", id: 7 }
                      }
                    },
                    ArrayValue: { fields: { values: { rule: "repeated", type: "AnyValue", id: 1 } } },
                    KeyValueList: { fields: { values: { rule: "repeated", type: "KeyValue", id: 1 } } },
                    KeyValue: { fields: { key: { type: "string", id: 1 }, value: { type: "AnyValue", id: 2 } } },
                    InstrumentationScope: {
                      fields: {
                        name: { type: "string", id: 1 },
                        version: { type: "string", id: 2 },
                        attributes: { ...keyValues, id: 3 },
                        droppedAttributesCount: { type: "uint32", id: 4 }
                      }
                    }
                  }
                }
              }
            },
            resource: {
              nested: {
                v1: {
                  nested: {
                    Resource: {
                      fields: { attributes: { ...keyValues, id: 1 }, droppedAttributesCount: { type: "uint32", id: 2 } }
                    }
                  }
                }
              }
            },
            trace: {
              nested: {
                v1: {
                  nested: {
                    ResourceSpans: {
                      fields: {
                        resource: { type: "opentelemetry.proto.resource.v1.Resource", id: 1 },
                        scopeSpans: { rule: "repeated", type: "ScopeSpans", id: 2 },
                        schemaUrl: { type: "string", id: 3 }
                      }
                    },
                    ScopeSpans: {
                      fields: {
                        scope: { type: "opentelemetry.proto.common.v1.InstrumentationScope", id: 1 },
                        spans: { rule: "repeated", type: "Span", id: 2 },
                        schemaUrl: { type: "string", id: 3 }
                      }
                    },
                    Span: {
                      fields: {
                        traceId: { type: "bytes", id: 1 },
                        spanId: { type: "bytes", id: 2 },
                        traceState: { type: "string", id: 3 },
                        parentSpanId: { type: "bytes", id: 4 },
                        flags: { type: "fixed32", id: 16 },
                        name: { type: "string", id: 5 },
                        kind: { type: "int32", id: 6 },
                        startTimeUnixNano: { type: "fixed64", id: 7 },
                        endTimeUnixNano: { type: "fixed64", id: 8 },
                        attributes: { ...keyValues, id: 9 },
                        droppedAttributesCount: { type: "uint32", id: 10 },
                        droppedEventsCount: { type: "uint32", id: 12 },
                        links: { rule: "repeated", type: "Link", id: 13 },
                        droppedLinksCount: { type: "uint32", id: 14 },
                        status: { type: "Status", id: 15 }
                      }
                    },
                    // `Span.Link` in trace.proto; a nested message's name is not on the wire.
                    Link: {
                      fields: {
                        traceId: { type: "bytes", id: 1 },
                        spanId: { type: "bytes", id: 2 },
                        traceState: { type: "string", id: 3 },
                        attributes: { ...keyValues, id: 4 },
                        droppedAttributesCount: { type: "uint32", id: 5 },
                        flags: { type: "fixed32", id: 6 }
                      }
                    },
                    // `code` is the `Status.StatusCode` enum, an int32 on the wire.
                    Status: { fields: { message: { type: "string", id: 2 }, code: { type: "int32", id: 3 } } }
                  }
                }
              }
            },
            collector: {
              nested: {
                trace: {
                  nested: {
                    v1: {
                      nested: {
                        ExportTraceServiceRequest: {
                          fields: {
                            resourceSpans: {
                              rule: "repeated",
                              type: "opentelemetry.proto.trace.v1.ResourceSpans",
                              id: 1
                            }
                          }
                        },
                        ExportTraceServiceResponse: {
                          fields: { partialSuccess: { type: "ExportTracePartialSuccess", id: 1 } }
                        },
                        ExportTracePartialSuccess: {
                          fields: { rejectedSpans: { type: "int64", id: 1 }, errorMessage: { type: "string", id: 2 } }
                        }
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
})

const Request = root.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest")
const Response = root.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse")

/**
 * The two messages as defined above: what the tests' collector reads with
 * when the official definitions (test/interop's project) are not installed.
 */
export const definitions = { ExportTraceServiceRequest: Request, ExportTraceServiceResponse: Response } as const

const ID_KEYS: ReadonlySet<string> = new Set(["traceId", "spanId", "parentSpanId"])

/** The JSON form with its hex ids as bytes: the message protobufjs writes. */
const withByteIds = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(withByteIds)
  if (typeof value !== "object" || value === null) return value
  const out: Record<string, unknown> = {}
  for (const [key, inner] of Object.entries(value)) {
    out[key] = ID_KEYS.has(key) && typeof inner === "string" ? Buffer.from(inner, "hex") : withByteIds(inner)
  }
  return out
}

/** An `ExportTraceServiceRequest` in its OTLP/JSON form (as `Encoding.ts` writes it), as protobuf. */
export const encodeProtobufRequest = (json: unknown): Uint8Array =>
  Request.encode(withByteIds(json) as Record<string, unknown>).finish()

/** OTLP/JSON request text (UTF-8 bytes), as protobuf. */
export const protobufFromJsonBody = (body: Uint8Array): Uint8Array =>
  encodeProtobufRequest(JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8")))

/**
 * `partialSuccess` of a protobuf `ExportTraceServiceResponse`; undefined
 * when the body is not one (the caller then reads it as JSON).
 */
export const readProtobufAnswer = (
  body: Uint8Array
): { readonly rejectedSpans: unknown; readonly errorMessage: unknown } | undefined => {
  let message: protobuf.Message
  try {
    message = Response.decode(body)
  } catch {
    return undefined
  }
  const object = Response.toObject(message, { longs: String }) as {
    partialSuccess?: { rejectedSpans?: string; errorMessage?: string }
  }
  return { rejectedSpans: object.partialSuccess?.rejectedSpans, errorMessage: object.partialSuccess?.errorMessage }
}
