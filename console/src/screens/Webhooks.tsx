export const Webhooks = () => (
  <section aria-labelledby="page-title">
    <h1 id="page-title" tabIndex={-1}>Webhooks</h1>
  </section>
)
