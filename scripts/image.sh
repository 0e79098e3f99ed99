#!/usr/bin/env bash
# make image: the netrig agent's OCI image (docs/distributed.md, deploy/README.md), built from Debian
# packages and this tree with no registry pull:
#
#   1. netrig's wheel, built from this tree (maturin, release; abi3: any CPython >= 3.11);
#   2. its Python dependencies, fetched here from PyPI as wheels (this machine's pip settings: index,
#      proxy, CA) for this machine's CPython 3.11 (a bookworm machine's, as the image's);
#   3. a Debian bookworm root file system (mmdebstrap, from the apt mirror this machine uses) with
#      python3, iproute2, ethtool, openssl, linuxptp; netrig installed from those wheels only (no
#      network inside) in a virtualenv at /opt/netrig;
#   4. the image imported from it (podman import: ENTRYPOINT netrig serve), tagged netrig-agent:latest,
#      and saved as an OCI archive at target/image/netrig-agent.tar (`docker load` or `podman load`).
#
# Then scripts/image-check.py runs two agent containers from it under a controller and counts every
# frame (IMAGE_CHECK=0 skips it). Needs root (mmdebstrap's root mode, podman) and the Debian packages
# mmdebstrap, podman and runc (installed here when missing; runc: crun refuses hybrid cgroups).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=target/image
TAG=${IMAGE_TAG:-netrig-agent:latest}
SUITE=bookworm
MIRROR=${IMAGE_MIRROR:-http://deb.debian.org/debian}
# what the agent runs with: iproute2 (namespaces, links), ethtool, openssl (the self-signed
# certificate), linuxptp (pmc: the host's PTP state), ca-certificates (--agent-ca aside, the system's)
PACKAGES=python3,python3-venv,iproute2,ethtool,openssl,linuxptp,ca-certificates

say() { printf '\033[1m[image]\033[0m %s\n' "$*"; }

[ "$(id -u)" = 0 ] || { echo "make image: run as root (mmdebstrap and podman build a root file system)" >&2; exit 1; }
missing=()
for p in mmdebstrap podman runc; do command -v "$p" >/dev/null || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

rm -rf "$OUT" && mkdir -p "$OUT/wheel"
say "netrig's wheel (release build)"
VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH" .venv/bin/maturin build --release -q -o "$OUT/wheel" 2>&1 \
  | grep -v -E '^(📦|🔗|🐍|💻|📖|🛠|✏️)' || true
wheel=$(ls "$OUT"/wheel/netrig-*.whl)
say "its dependencies (wheels for this machine's CPython 3.11, as bookworm's)"
.venv/bin/python -m pip download -q --disable-pip-version-check --only-binary :all: -d "$OUT/wheel" "$wheel"

say "root file system: Debian $SUITE from $MIRROR, netrig in /opt/netrig"
mmdebstrap --mode=root --variant=apt --include="$PACKAGES" --quiet \
  --customize-hook="copy-in $OUT/wheel /tmp" \
  --customize-hook='chroot "$1" python3 -m venv /opt/netrig' \
  --customize-hook="chroot \"\$1\" env -i /opt/netrig/bin/pip install -q --no-cache-dir --disable-pip-version-check \
                    --no-index --find-links /tmp/wheel /tmp/wheel/$(basename "$wheel")" \
  --customize-hook='chroot "$1" /opt/netrig/bin/python -m compileall -q /opt/netrig/lib' \
  --customize-hook='rm -rf "$1"/tmp/wheel "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
  "$SUITE" "$OUT/rootfs.tar" "$MIRROR"

say "image $TAG (podman import: no registry)"
podman rmi -f "$TAG" >/dev/null 2>&1 || true
podman import -q \
  --change 'ENV PATH=/opt/netrig/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV XDG_STATE_HOME=/var/lib/netrig' \
  --change 'EXPOSE 8443' \
  --change 'ENTRYPOINT ["netrig", "serve"]' \
  "$OUT/rootfs.tar" "$TAG" >/dev/null
podman save -q --format oci-archive -o "$OUT/netrig-agent.tar" "$TAG"
rm -f "$OUT/rootfs.tar"
say "built $TAG ($(podman image inspect --format '{{.Size}}' "$TAG" | numfmt --to=iec) ; $OUT/netrig-agent.tar)"

if [ "${IMAGE_CHECK:-1}" != 0 ]; then
  .venv/bin/python scripts/image-check.py "$TAG"
fi
