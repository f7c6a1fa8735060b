/**
 * The CLI's side of the admin channel (`src/cli/AdminChannel.ts`): when
 * a server holds the embedded data directory, the CLI sends it its
 * arguments over `admin.sock` and prints what the command printed there.
 */
import * as net from "node:net"
import * as path from "node:path"

/** The admin channel's socket in `dataDir`. */
export const adminSocketPath = (dataDir: string) => path.join(path.resolve(dataDir), "admin.sock")

/** What a command printed and how it ended. */
export interface CliAnswer {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Whether something accepts connections on `socket`. */
export const answers = (socket: string): Promise<boolean> =>
  new Promise((resolve) => {
    const connection = net.connect({ path: socket })
    connection.once("connect", () => {
      connection.destroy()
      resolve(true)
    })
    connection.once("error", () => resolve(false))
  })

/**
 * Runs `argv` on the server listening on `socket`. `node:http` loads only
 * here: importing it makes Node load its fetch implementation too (about
 * 15 ms), which a command the CLI runs itself never needs.
 */
export const sendCommand = async (
  socket: string,
  argv: ReadonlyArray<string>,
  timeoutMs = 60_000
): Promise<CliAnswer> => {
  const http = await import("node:http")
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ argv })
    const request = http.request({
      socketPath: socket,
      path: "/v1/cli",
      method: "POST",
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      timeout: timeoutMs
    }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        if (response.statusCode !== 200) {
          return reject(new Error(`the server's admin channel answered ${response.statusCode}: ${text}`))
        }
        try {
          resolve(JSON.parse(text) as CliAnswer)
        } catch (error) {
          reject(error)
        }
      })
      response.on("error", reject)
    })
    request.on("timeout", () => request.destroy(new Error(`the server did not answer within ${timeoutMs} ms`)))
    request.on("error", reject)
    request.end(body)
  })
}
