#!/usr/bin/env bash
# netrig set-up: Debian packages, the .venv virtualenv, the native build.
# Idempotent and quick when already done: each step leaves a stamp under .stamps/ keyed by the
# inputs it depends on, and the native build is left to cargo/maturin's own change tracking.
#
#   scripts/setup.sh [apt] [venv] [build]     (no argument: all three)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .stamps
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=(apt venv build)

# libpcap0.8: the capture benchmark's libpcap method loads it at run time; dpdk-dev: dpdk-testpmd,
# a DUT of the forwarder test beds (forward_backend testpmd) and the peer of make bench; prometheus:
# the server the telemetry test scrapes a run with (started by the test, never as a service); openssl:
# netrig serve's self-signed certificate; linuxptp: pmc, by which an agent reads its host's ptp4l,
# and the ptp4l the PTP test runs in two namespaces (its units are templates: nothing starts);
# iputils-ping: the ping of netrig serve's devices (OTG control/action); lldpd: netrig serve's LLDP
# (started per port by netrig serve, never as a service); bird2: the routed test beds' BGP
# (`routing = "bgp"`: started in their namespaces by the build, never as a service).
APT_PACKAGES="iproute2 iputils-ping lldpd bird2 nftables ethtool procps util-linux python3-venv chromium iperf3 iperf sockperf openssh-client openssh-server libpcap0.8 dpdk-dev prometheus openssl bpftool linuxptp"
PY=${PYTHON:-python3}

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

do_apt() {
  local key; key=$(echo "$APT_PACKAGES" | sha1sum | cut -c1-12)
  [ -f ".stamps/apt-$key" ] && return 0
  local missing=()
  for p in $APT_PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
      say "missing Debian packages: ${missing[*]} (run as root, or install them yourself)"; return 0
    fi
    say "installing Debian packages: ${missing[*]}"
    apt-get update -qq
    # openssh-server is here for sshd run by the remote-monitoring tests inside a namespace,
    # prometheus for the server the telemetry test starts itself, lldpd for netrig serve's LLDP;
    # none of them may start (or leave running) a system-wide service (nor the node exporter
    # prometheus recommends): policy-rc.d refuses it.
    local policy=""
    if [[ " ${missing[*]} " == *" openssh-server "* || " ${missing[*]} " == *" prometheus "* \
          || " ${missing[*]} " == *" lldpd "* || " ${missing[*]} " == *" bird2 "* ]] && [ ! -e /usr/sbin/policy-rc.d ]; then
      policy=/usr/sbin/policy-rc.d; printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"
      say "installing without starting the system's ssh, prometheus, lldpd or bird service"
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null || { [ -z "$policy" ] || rm -f "$policy"; exit 1; }
    [ -z "$policy" ] || rm -f "$policy"
  fi
  touch ".stamps/apt-$key"
}

do_venv() {
  local key; key=$(sha1sum pyproject.toml | cut -c1-12)
  [ -f ".stamps/venv-$key" ] && [ -x .venv/bin/python ] && return 0
  if ! command -v cargo >/dev/null; then
    say "cargo not found: install Rust (rustup) first"; exit 1
  fi
  [ -x .venv/bin/python ] || { say "creating .venv"; "$PY" -m venv .venv; }
  say "installing Python dependencies into .venv"
  local deps; deps=$(.venv/bin/python - <<'PYEOF'
import tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
print(" ".join(repr(d) for d in p["dependencies"] + p["optional-dependencies"]["test"]).replace("'", ""))
PYEOF
)
  # uv (from PyPI, into the venv) installs them in ~7 s where pip takes ~35 s (measured on a clean
  # clone, 2 cores); pip when uv cannot (no uv wheel, the index refused it). Both byte-compile what
  # they install (uv only when told): where PYTHONDONTWRITEBYTECODE is set, as it is on this kind of
  # machine, nothing else would, and every process compiled its imports again (snappi alone: 1.2 s
  # of each `netrig serve`'s 1.7-s start).
  local links=(); [ -d "${PIP_FIND_LINKS:-}" ] && links=(--find-links "$PIP_FIND_LINKS")
  # shellcheck disable=SC2086  # deps: one requirement per word
  if ! { .venv/bin/pip install -q --disable-pip-version-check uv >/dev/null 2>&1 \
         && .venv/bin/uv pip install -q --native-tls --compile-bytecode --python .venv/bin/python "${links[@]}" "maturin>=1.5,<2" $deps; }; then
    say "uv could not install them: pip instead"
    # shellcheck disable=SC2086
    .venv/bin/pip install -q --disable-pip-version-check "maturin>=1.5,<2" $deps
  fi
  touch ".stamps/venv-$key"
}

do_build() {
  # maturin develop rebuilds only what changed (cargo), and installs netrig editable into .venv.
  # NETRIG_PROFILE: the cargo profile (release; `make test` builds test-ci, the profile its Rust
  # tests compile with, so that they reuse every dependency this build compiled).
  local profile=${NETRIG_PROFILE:-release}
  # netrig's own modules byte-compiled too (only what changed: ~0.1 s), for the same reason as do_venv's
  .venv/bin/python -m compileall -q -j 0 python/netrig
  local sum; sum=$( (echo "$profile"; find crates Cargo.toml pyproject.toml -type f \( -name '*.rs' -o -name '*.toml' \) -print0 \
                   | sort -z | xargs -0 sha1sum) | sha1sum | cut -c1-12)
  if [ -f ".stamps/build-$sum" ] && .venv/bin/python -c 'import netrig._native' 2>/dev/null; then return 0; fi
  say "building the native engine ($profile)"
  # A failed build leaves the previous module importable: maturin's own status decides (pipefail).
  local rc=0
  VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH" .venv/bin/maturin develop --profile "$profile" -q 2>&1 \
    | { grep -v -E '^(📦|🔗|🐍|💻|📖|🛠|✏️|⚠️  Warning: .*pip)' || true; } || rc=$?
  [ "$rc" = 0 ] && .venv/bin/python -c 'import netrig._native' || { say "native build failed"; exit 1; }
  rm -f .stamps/build-*; touch ".stamps/build-$sum"
}

for s in "${steps[@]}"; do "do_$s"; done
