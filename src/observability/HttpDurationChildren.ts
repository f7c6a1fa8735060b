/**
 * The request duration histogram's children, kept per label set.
 *
 * Speeds up: `histogram.observe(labels, value)` builds and sorts a hash
 * of the label object on every call (prom-client); a child from
 * `labels(...)` has it computed once. A request then pays a `Map.get` on a
 * short string and the bucket update (with the middleware as one plain step:
 * bench/notes/request-path.md, arm `mw`: a feedback POST 660 to 583 µs of
 * svc CPU in the first round). Label sets are bounded: methods outside the
 * known ones and unmatched routes are already folded into `_OTHER`, and
 * statuses are three digits.
 */
import type * as Prometheus from "prom-client"

export const makeHttpDurationChildren = (
  histogram: Prometheus.Histogram<"http_request_method" | "http_route" | "http_response_status_code">
) => {
  const children = new Map<
    string,
    Prometheus.Histogram.Internal<"http_request_method" | "http_route" | "http_response_status_code">
  >()
  return (method: string, route: string, status: number, seconds: number) => {
    const key = `${method} ${status} ${route}`
    let child = children.get(key)
    if (child === undefined) {
      child = histogram.labels({ http_request_method: method, http_route: route, http_response_status_code: status })
      children.set(key, child)
    }
    child.observe(seconds)
  }
}
