#!/bin/sh
# A/B blocks of the request path, layer by layer: svc's CPU per request (all
# threads, and by thread: "V8 DefaultWorke" is V8's helper threads, GC
# mostly) for the cheapest authenticated writes and a feedback POST
# (AB_ENDPOINTS, default runs,agent-sessions,feedback), from
# several checkouts in interleaved rounds (each run starts svc fresh on a
# fresh database). Arms are label=path pairs; each path needs node_modules.
# With AB_ALLOC=1, svc runs with --trace-gc-nvp and each block also prints what
# its main thread allocated per request (a figure the machine's load does
# not move, unlike CPU; the CPU figures of such a run are not comparable).
#
#   AB_ARMS="base=/tmp/a after=/work/main" AB_ROUNDS=2 AB_DB=postgres \
#   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test sh bench/ab-request-path.sh
set -eu
cd "$(dirname "$0")/.."
rounds=${AB_ROUNDS:-2}
for round in $(seq 1 "$rounds"); do
  for arm in $AB_ARMS; do
    label=${arm%%=*}
    dir=${arm#*=}
    echo "== round $round $label ($(uptime | sed 's/.*load average: //'))"
    PROF_OFF=1 PROF_ALLOC=${AB_ALLOC:-0} PROF_DB=${AB_DB:-postgres} PROF_ENDPOINT=${AB_ENDPOINTS:-runs,agent-sessions,feedback} PROF_COUNT=${AB_COUNT:-3000} PROF_WARMUP=${AB_WARMUP:-1000} \
      PROF_SVC_DIR="$dir" PROF_DIR=/tmp/ab-request-path npx node bench/profile-writes.ts 2>&1 | grep -E "req/s|by thread|allocated"
  done
done
