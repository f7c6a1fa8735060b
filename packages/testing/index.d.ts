// The test kit is part of the server (it starts the whole service in-process), so it ships in
// the `svc` package as `svc/testing`; this package names it and brings the typed client along.
export * from "svc/testing"
