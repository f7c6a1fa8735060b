#!/usr/bin/env node
// `svc`: the server (`svc start`) and its command line (`svc orgs create ...`),
// both run from one bundle, dist/cli-bundle/ (scripts/bundle-cli.ts). Plain
// JavaScript that any Node can parse, so that an old one says what it lacks
// instead of failing on the first modern syntax.
const [major, minor] = process.versions.node.split(".").map(Number)
if (major < 22 || (major === 22 && minor < 19)) {
  console.error(`svc needs Node >= 22.19 (this is ${process.version}).`)
  process.exit(1)
}
await import("../dist/cli-bundle/main.js")
