/**
 * `npm start`: the HTTP service on HOST:PORT (default 127.0.0.1:8080), on
 * PostgreSQL when DATABASE_URL is set, else on the embedded database in
 * SVC_DATA_DIR. SIGTERM and Ctrl-C drain in-flight requests and exit 0.
 */
import { runServer } from "./server/Serve.ts"

runServer()
