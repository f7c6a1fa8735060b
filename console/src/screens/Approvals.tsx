export const Approvals = () => (
  <section aria-labelledby="page-title">
    <h1 id="page-title" tabIndex={-1}>Approvals</h1>
  </section>
)
