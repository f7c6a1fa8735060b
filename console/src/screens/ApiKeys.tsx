export const ApiKeys = () => (
  <section aria-labelledby="page-title">
    <h1 id="page-title" tabIndex={-1}>ApiKeys</h1>
  </section>
)
