/**
 * An HTTP server that listens last. `NodeHttpServer.layer` listens as soon
 * as it is built, before the routes, migrations and workers that are built
 * on top of it: a request arriving in between reaches a server with no
 * handler and hangs. Here the routes attach to a server that does not
 * listen yet, and `listen` opens the socket once the whole application is
 * built: until then a client's connection is refused, which it can retry.
 *
 * `listen` itself is `NodeHttpServer.make` (graceful shutdown and all) with
 * the application attached at once; a request accepted in the moment
 * between the socket opening and the handler attaching is held and handed
 * over, never left unanswered.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Context, Effect, Layer, References, Scope } from "effect"
import { HttpServer, type HttpServerError } from "effect/http"
import type { SocketAddress } from "effect/net/NetAddress"
import * as Http from "node:http"
import { type ListenFailed, listenFailed } from "../platform/StartFailure.ts"
import { requestContext } from "./RequestContext.ts"

interface Attached {
  readonly app: Effect.Effect<any, any, any>
  readonly middleware: any
  /** The services of the layer that attached the application: what its requests run with. */
  readonly context: Context.Context<never>
}

export class HttpListener extends Context.Service<HttpListener, {
  /** Opens the socket and serves the attached application until the scope closes. */
  readonly listen: Effect.Effect<void, HttpServerError.ServeError | ListenFailed, Scope.Scope>
  /**
   * Serves the attached application on an ephemeral loopback port (the
   * services a request on the real socket gets, no log lines) while `use`
   * runs; closed after.
   */
  readonly rehearse: <A, E>(use: (port: number) => Effect.Effect<A, E>) => Effect.Effect<A, E | Error>
}>()("svc/server/HttpListener") {}

/**
 * `HttpServer` (not listening yet) and `HttpListener` for the Node server
 * `evaluate` creates, with Node's HTTP platform services.
 */
const layer = (evaluate: () => Http.Server, options: NodeHttpServer.Options) =>
  Layer.effectContext(Effect.sync(() => {
    let attached: Attached | undefined
    let address: SocketAddress | undefined

    const server = HttpServer.make({
      serve: ((app: Attached["app"], middleware?: unknown) =>
        Effect.contextWith((context: Context.Context<never>) =>
          attached === undefined
            ? Effect.sync(() => {
              attached = { app, middleware, context }
            })
            : Effect.die(new Error("HttpListener serves one application"))
        )) as HttpServer.HttpServer["Service"]["serve"],
      get address(): SocketAddress {
        if (address === undefined) throw new Error("the HTTP server is not listening yet")
        return address
      }
    })

    /**
     * A Node server on an ephemeral loopback port, serving the attached
     * application as the real socket will (same handler, same services, no
     * log lines), for the time `use` takes.
     */
    const rehearse = <A, E>(use: (port: number) => Effect.Effect<A, E>) =>
      Effect.scoped(Effect.gen(function*() {
        const app = attached
        if (app === undefined) {
          return yield* Effect.die(new Error("HttpListener.rehearse: no application attached"))
        }
        const scope = yield* Effect.scope
        const forRequests = Context.merge(
          requestContext(Context.merge(yield* Effect.context<never>(), app.context)),
          Context.make(References.MinimumLogLevel, "None")
        )
        const handler = yield* NodeHttpServer.makeHandler(app.app, { scope, middleware: app.middleware }).pipe(
          Effect.updateContext((_: Context.Context<never>) =>
            Context.add(forRequests, Scope.Scope, scope)
          )
        )
        const node = Http.createServer(handler)
        yield* Effect.acquireRelease(
          Effect.callback<void, Error>((resume) => {
            node.once("error", (error) => resume(Effect.fail(error)))
            node.listen(0, "127.0.0.1", () => resume(Effect.void))
          }),
          () =>
            Effect.callback<void>((resume) => {
              node.close(() => resume(Effect.void))
              node.closeAllConnections()
            })
        )
        return yield* use((node.address() as { port: number }).port)
      }))

    const listen = Effect.gen(function*() {
      const app = attached
      if (app === undefined) return yield* Effect.die(new Error("HttpListener.listen: no application attached"))
      const node = evaluate()
      const early: Array<readonly [Http.IncomingMessage, Http.ServerResponse]> = []
      const hold = (request: Http.IncomingMessage, response: Http.ServerResponse) =>
        void early.push([request, response])
      node.on("request", hold)
      const listening = yield* NodeHttpServer.make(() => node, options).pipe(
        Effect.mapError(listenFailed({ port: "PORT", host: "HOST" }, options))
      )
      const scope = yield* Effect.scope
      // Requests start with the application's services less those only its
      // handlers use (`RequestContext.ts`): replaced, not merged into this
      // fiber's own.
      const forRequests = requestContext(Context.merge(yield* Effect.context<never>(), app.context))
      yield* listening.serve(app.app, app.middleware).pipe(
        Effect.updateContext((_: Context.Context<never>) => Context.add(forRequests, Scope.Scope, scope))
      )
      node.off("request", hold)
      for (const [request, response] of early) node.emit("request", request, response)
      address = listening.address
    })

    return Context.make(HttpServer.HttpServer, server).pipe(
      Context.add(HttpListener, HttpListener.of({ listen, rehearse }))
    )
  })).pipe(Layer.merge(NodeHttpServer.layerHttpServices))

export const ListenLater = {
  layer,
  /** Opens the socket: build it after everything the application needs. */
  listen: Layer.effectDiscard(HttpListener.use((listener) => listener.listen))
}
