/**
 * Reading `/metrics` as Prometheus would: the text is parsed by
 * `parse-prometheus-text-format` (a port of the Python client's parser,
 * output shaped like `prom2json`), which throws on a malformed sample line.
 *
 * One limitation of that parser: it reads a histogram family only when its
 * series have no labels (it keeps `le` and folds everything else away). So
 * the text is parsed twice: as is, for the families, their types and help;
 * and without the histograms' `# TYPE` lines, where each `_bucket`, `_sum`
 * and `_count` line is an untyped sample with all its labels, from which
 * `histogram` gathers a series. Dropping those lines is all this file does
 * to the text; reading it is the parser's job.
 */
import { Effect } from "effect"
import { createRequire } from "node:module"
import { raw } from "./http.ts"

const require = createRequire(import.meta.url)
const parsePrometheusTextFormat: (text: string) => ReadonlyArray<Family> = require("parse-prometheus-text-format")

export interface Sample {
  readonly labels?: Readonly<Record<string, string>>
  readonly value?: string
  readonly buckets?: Readonly<Record<string, string>>
  readonly count?: string
  readonly sum?: string
}

export interface Family {
  readonly name: string
  readonly help: string
  readonly type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED"
  readonly metrics: ReadonlyArray<Sample>
}

export const parseExposition = (text: string): ReadonlyArray<Family> => parsePrometheusTextFormat(text)

export interface Scrape {
  readonly status: number
  readonly contentType: string | null
  readonly text: string
  readonly families: ReadonlyArray<Family>
  /** Every sample line with its labels, histogram lines included (families `x_bucket`, `x_sum`, `x_count`). */
  readonly samples: ReadonlyArray<Family>
}

const untypedHistograms = (text: string) =>
  text.split("\n").filter((line) => !/^# TYPE \S+ histogram$/.test(line)).join("\n")

/** Text already in hand (e.g. a registry rendered in-process), parsed. */
export const fromText = (text: string): Scrape => ({
  status: 200,
  contentType: null,
  text,
  families: parseExposition(text),
  samples: parseExposition(untypedHistograms(text))
})

/** GET the URL and parse the answer (when it is 200). */
export const scrape = (url: string, token?: string) =>
  Effect.map(
    raw(url, token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } }),
    (response): Scrape => ({
      status: response.status,
      contentType: response.headers.get("content-type"),
      text: response.text,
      families: response.status === 200 ? parseExposition(response.text) : [],
      samples: response.status === 200 ? parseExposition(untypedHistograms(response.text)) : []
    })
  )

export const family = (scraped: Scrape, name: string): Family | undefined =>
  scraped.families.find((f) => f.name === name)

const matches = (sample: Sample, labels: Readonly<Record<string, string>>) =>
  Object.entries(labels).every(([key, value]) => sample.labels?.[key] === value)

/** The value of the counter or gauge series with these labels (all of them), or `undefined`. */
export const value = (
  scraped: Scrape,
  name: string,
  labels: Readonly<Record<string, string>> = {}
): number | undefined => {
  const sample = family(scraped, name)?.metrics.find((s) => matches(s, labels))
  return sample?.value === undefined ? undefined : Number(sample.value)
}

// Untyped, a histogram's lines come series by series, so `x_bucket` appears as several families.
const samplesOf = (scraped: Scrape, name: string) =>
  scraped.samples.filter((f) => f.name === name).flatMap((f) => f.metrics)

const sameLabels = (sample: Sample, labels: Readonly<Record<string, string>>, ignore?: string) => {
  const own = Object.entries(sample.labels ?? {}).filter(([key]) => key !== ignore)
  return own.length === Object.keys(labels).length && own.every(([key, v]) => labels[key] === v)
}

/**
 * One series of a histogram family: `count`, `sum` and `buckets` (by `le`),
 * or `undefined` when it has no such series. `labels` are all the labels of
 * the series but `le`.
 */
export const histogram = (scraped: Scrape, name: string, labels: Readonly<Record<string, string>> = {}) => {
  const count = samplesOf(scraped, `${name}_count`).find((s) => sameLabels(s, labels))
  const sum = samplesOf(scraped, `${name}_sum`).find((s) => sameLabels(s, labels))
  if (count?.value === undefined || sum?.value === undefined) return undefined
  const buckets: Record<string, number> = {}
  for (const bucket of samplesOf(scraped, `${name}_bucket`)) {
    if (sameLabels(bucket, labels, "le")) buckets[bucket.labels!.le!] = Number(bucket.value)
  }
  return { count: Number(count.value), sum: Number(sum.value), buckets }
}

/** Every (sample family, label name, label value) of the scrape, histogram lines included. */
export const labelValues = (
  scraped: Scrape
): ReadonlyArray<{ readonly family: string; readonly label: string; readonly value: string }> =>
  scraped.samples.flatMap((f) =>
    f.metrics.flatMap((sample) =>
      Object.entries(sample.labels ?? {}).map(([label, value]) => ({ family: f.name, label, value }))
    )
  )
