#!/usr/bin/env bash
# The Go programs of the suite: the gosnappi client of tests/otg/test_gosnappi.py (tests/otg/gosnappi),
# at target/gosnappi/client, and the test binary of the Kubernetes manifest check (deploy/k8s/check,
# run by tests/otg/test_deploy.py), at target/gosnappi/k8s-check.test.
#
#   scripts/gosnappi-client.sh build       build them now unless newer than their sources (the tests do)
#   scripts/gosnappi-client.sh start PID   build them in the background, stopped if process PID ends
#   scripts/gosnappi-client.sh wait        wait for that background build to end
#
# With an empty Go build cache (a fresh CI machine) the client is ~90 s of two cores (gosnappi, gRPC,
# OpenTelemetry), most of its test's time; the check ~45 s of one (k8s.io/api). `make test` starts it first, under SCHED_IDLE and in the
# idle I/O class: it takes the CPU time and disk the set-up, build, lint and first pass leave; the
# suite waits for it before the host tests, which need a quiet machine. A failed background build
# changes nothing but the time: the test builds the client itself. Unoptimised and stripped (116 s
# optimised, 84 s so): the client's speed is not measured.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=target/gosnappi
# each program: its source directory and its binary
PROGRAMS=("tests/otg/gosnappi $OUT/client" "deploy/k8s/check $OUT/k8s-check.test")

fresh_one() {  # SRC BIN
  [ -x "$2" ] || return 1
  for f in "$1"/go.mod "$1"/go.sum "$1"/*.go; do [ "$2" -nt "$f" ] || return 1; done
}

fresh() {
  for p in "${PROGRAMS[@]}"; do fresh_one $p || return 1; done
}

build_one() {  # SRC BIN: a program, or (a directory of _test.go files) its test binary
  fresh_one "$1" "$2" && return 0
  mkdir -p "$OUT"
  local tmp="$ROOT/$2.tmp.$$" how=(build)
  compgen -G "$1/*_test.go" >/dev/null && how=(test -c)
  (cd "$1" && GOFLAGS=-mod=readonly go "${how[@]}" -gcflags=all="-N -l" -ldflags="-s -w" -o "$tmp" .)
  mv "$tmp" "$ROOT/$2"
}

build() {
  for p in "${PROGRAMS[@]}"; do build_one $p; done
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
  build) build ;;
  start) start "${2:?the pid of the process the build belongs to}" ;;
  wait) wait_for ;;
  *) echo "usage: $0 build | start PID | wait" >&2; exit 2 ;;
esac
