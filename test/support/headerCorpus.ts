/** The collector header corpus (refused, invalid and accepted headers), shared by the unit and API tests. */
import { MAX_VALUE_BYTES } from "../../src/outbound/HeaderRules.ts"

/** Refused header names: one entry per refused class, in several spellings. */
export const refusedNameCorpus: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
  ["transport: Host", ["Host", "host", "HOST"]],
  ["hop-by-hop: Connection", ["Connection", "connection"]],
  ["hop-by-hop: Keep-Alive", ["Keep-Alive"]],
  ["hop-by-hop: Proxy-*", ["Proxy-Authorization", "proxy-connection", "Proxy-Authenticate"]],
  ["hop-by-hop: TE", ["TE", "te"]],
  ["hop-by-hop: Trailer", ["Trailer"]],
  ["transport: Transfer-Encoding", ["Transfer-Encoding"]],
  ["hop-by-hop: Upgrade", ["Upgrade"]],
  ["transport: Content-Length", ["Content-Length"]],
  ["transport: Expect", ["Expect"]],
  ["transport: Content-Type", ["Content-Type", "content-type"]],
  ["transport: Content-Encoding", ["Content-Encoding"]],
  ["trace context: traceparent", ["traceparent", "TraceParent"]],
  ["trace context: tracestate", ["tracestate"]],
  ["trace context: baggage", ["baggage", "Baggage"]],
  ["trace context: b3", ["b3", "B3"]],
  ["trace context: x-b3-*", ["X-B3-TraceId", "x-b3-spanid", "X-B3-Sampled"]],
  ["trace context: uber-trace-id", ["uber-trace-id"]],
  ["trace context: uberctx-*", ["uberctx-user", "UberCtx-x"]],
  ["trace context: ot-tracer-*", ["ot-tracer-traceid", "OT-Tracer-Sampled"]],
  ["trace context: x-amzn-trace-id", ["X-Amzn-Trace-Id"]],
  ["trace context: x-cloud-trace-context", ["X-Cloud-Trace-Context"]],
  ["cookie: Cookie", ["Cookie", "cookie"]],
  ["cookie: Set-Cookie", ["Set-Cookie"]]
]

export const invalidNameCorpus: ReadonlyArray<string> = [
  "",
  "X Token",
  "X-Token:",
  "X\r\nInjected",
  "Ключ",
  "x(y)",
  "a/b",
  "x\u0000",
  "@home"
]

export const invalidValueCorpus: ReadonlyArray<readonly [string, string]> = [
  ["CR", "abc\rdef"],
  ["LF", "abc\ndef"],
  ["CRLF injection", "v\r\nX-Injected: 1"],
  ["NUL", "abc\u0000def"],
  ["other control (BEL)", "abc\u0007"],
  ["other control (ESC)", "\u001b[31m"],
  ["DEL", "abc\u007f"],
  ["C1 control (NEL)", "abc\u0085def"],
  ["C1 control (CSI)", "\u009b31m"],
  ["over 4 KiB", "a".repeat(MAX_VALUE_BYTES + 1)],
  ["a character a header cannot carry", "p\u2028q"]
]
