/** The examples of the MCP gateway's problems in the OpenAPI document (`Documentation.ts`). */
export const mcpProblemExamples = {
  UPSTREAM_FAILED: () => ({
    detail: "the upstream server could not be reached: the connection failed (ECONNREFUSED)",
    error: "the upstream server could not be reached: the connection failed (ECONNREFUSED)",
    duration_ms: 12
  })
}
