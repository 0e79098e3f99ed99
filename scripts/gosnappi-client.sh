#!/usr/bin/env bash
# The gosnappi client of tests/otg/test_gosnappi.py (tests/otg/gosnappi), at target/gosnappi/client.
#
#   scripts/gosnappi-client.sh build       build it now unless it is newer than its sources (the test does)
#   scripts/gosnappi-client.sh start PID   build it in the background, stopped if process PID ends
#   scripts/gosnappi-client.sh wait        wait for that background build to end
#
# With an empty Go build cache (a fresh CI machine) the build is ~90 s of two cores (gosnappi, gRPC,
# OpenTelemetry), most of the test's time. `make test` starts it first, under SCHED_IDLE and in the
# idle I/O class: it takes the CPU time and disk the set-up, build, lint and first pass leave; the
# suite waits for it before the host tests, which need a quiet machine. A failed background build
# changes nothing but the time: the test builds the client itself. Unoptimised and stripped (116 s
# optimised, 84 s so): the client's speed is not measured.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SRC=tests/otg/gosnappi
OUT=target/gosnappi
BIN=$OUT/client

fresh() {
  [ -x "$BIN" ] || return 1
  for f in "$SRC"/go.mod "$SRC"/go.sum "$SRC"/*.go; do [ "$BIN" -nt "$f" ] || return 1; done
}

build() {
  mkdir -p "$OUT"
  local tmp="$ROOT/$BIN.tmp.$$"
  (cd "$SRC" && GOFLAGS=-mod=readonly go build -gcflags=all="-N -l" -ldflags="-s -w" -o "$tmp" .)
  mv "$tmp" "$ROOT/$BIN"
}

start() {
  local owner=$1
  for tool in go chrt ionice setsid; do command -v "$tool" >/dev/null || exit 0; done
  fresh && exit 0
  mkdir -p "$OUT"
  # the builder in a process group of its own, every process of it at SCHED_IDLE and in the idle I/O
  # class (its 600 MB of build cache written beside cargo's target); the group is stopped if its
  # owner (make) ends first
  (
    setsid chrt --idle 0 ionice -c 3 "$ROOT/scripts/gosnappi-client.sh" build > "$OUT/build.log" 2>&1 &
    group=$!
    while kill -0 "$group" 2>/dev/null; do
      if ! kill -0 "$owner" 2>/dev/null; then
        kill -TERM -- "-$group" 2>/dev/null || true
        break
      fi
      sleep 0.5
    done
    rm -f "$OUT/pid"
  ) > /dev/null 2>&1 &
  echo $! > "$OUT/pid"
}

wait_for() {
  [ -f "$OUT/pid" ] || exit 0
  local pid; pid=$(cat "$OUT/pid")
  while kill -0 "$pid" 2>/dev/null; do sleep 0.5; done
  rm -f "$OUT/pid"
}

case "${1:-}" in
  build) fresh || build ;;
  start) start "${2:?the pid of the process the build belongs to}" ;;
  wait) wait_for ;;
  *) echo "usage: $0 build | start PID | wait" >&2; exit 2 ;;
esac
