/**
 * A test harness small enough to run unchanged on Node, Deno, Bun and
 * workerd: no imports, nothing but the language and `setTimeout`. Each
 * runtime's test runner has another API, so the receiver kit's one suite
 * brings its own (test/runtimes/receiver.test.ts runs it everywhere).
 */

export interface TestCase {
  readonly name: string
  readonly run: () => Promise<void> | void
}

export interface SuiteResult {
  readonly runtime: string
  readonly total: number
  readonly passed: ReadonlyArray<string>
  readonly failed: ReadonlyArray<{ readonly name: string; readonly message: string }>
  readonly milliseconds: number
}

export class AssertionError extends Error {
  constructor(message: string) {
    super(message)
    this.name = "AssertionError"
  }
}

const show = (value: unknown): string => {
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

export interface Assert {
  ok(condition: unknown, message?: string): asserts condition
  equal<A>(actual: A, expected: A, message?: string): void
  deepEqual(actual: unknown, expected: unknown, message?: string): void
  atMost(actual: number, limit: number, message?: string): void
}

export const assert: Assert = {
  ok(condition: unknown, message = "expected a true condition"): asserts condition {
    if (!condition) throw new AssertionError(message)
  },
  equal<A>(actual: A, expected: A, message = ""): void {
    if (!Object.is(actual, expected)) {
      throw new AssertionError(`${message ? `${message}: ` : ""}expected ${show(expected)}, got ${show(actual)}`)
    }
  },
  deepEqual(actual: unknown, expected: unknown, message = ""): void {
    if (show(actual) !== show(expected)) {
      throw new AssertionError(`${message ? `${message}: ` : ""}expected ${show(expected)}, got ${show(actual)}`)
    }
  },
  atMost(actual: number, limit: number, message = ""): void {
    if (!(actual <= limit)) {
      throw new AssertionError(`${message ? `${message}: ` : ""}expected at most ${limit}, got ${actual}`)
    }
  }
}

// Durations only, on runtimes without `performance` too (the harness has no imports).
const now = (): number => (typeof performance === "object" ? performance.now() : Date.now())

/** Runs every case in order, each within `timeoutMs`; never throws. */
export const runCases = async (
  runtime: string,
  cases: ReadonlyArray<TestCase>,
  timeoutMs = 20_000
): Promise<SuiteResult> => {
  const started = now()
  const passed: Array<string> = []
  const failed: Array<{ name: string; message: string }> = []
  for (const testCase of cases) {
    let timer: ReturnType<typeof setTimeout> | undefined
    try {
      await Promise.race([
        Promise.resolve().then(testCase.run),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new AssertionError(`timed out after ${timeoutMs} ms`)), timeoutMs)
        })
      ])
      passed.push(testCase.name)
    } catch (error) {
      failed.push({
        name: testCase.name,
        message: error instanceof Error ? `${error.name}: ${error.message}` : show(error)
      })
    } finally {
      if (timer !== undefined) clearTimeout(timer)
    }
  }
  return { runtime, total: cases.length, passed, failed, milliseconds: Math.round(now() - started) }
}
