/**
 * The version of svc: the server, the CLI, the packages and the database
 * schema's record all say this one. `/health`, the OpenAPI document,
 * `svc --version` and the `User-Agent` of outbound requests report it; a
 * test keeps it equal to every `package.json` of the repository.
 */
export const VERSION = "0.2.0"
