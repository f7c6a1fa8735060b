/**
 * `npm run openapi [-- --out FILE]`: writes the OpenAPI document (the one
 * `GET /openapi.json` serves) without starting the service, e.g. for
 * `redocly lint` or a code generator.
 */
import { OpenApi } from "effect/http-api"
import { writeFileSync } from "node:fs"
import { Api } from "../src/api/Api.ts"

const json = `${JSON.stringify(OpenApi.fromApi(Api), null, 2)}\n`
const at = process.argv.indexOf("--out")
if (at === -1) process.stdout.write(json)
else writeFileSync(process.argv[at + 1] ?? "openapi.json", json)
