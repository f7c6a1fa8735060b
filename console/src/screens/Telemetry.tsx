export const Telemetry = () => (
  <section aria-labelledby="page-title">
    <h1 id="page-title" tabIndex={-1}>Telemetry</h1>
  </section>
)
