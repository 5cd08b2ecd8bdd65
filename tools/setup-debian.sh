#!/usr/bin/env bash
# Installs every Debian 12 package rdmagate needs to build, test and run the rxe guest.
# Idempotent: when everything is present it does nothing (not even `apt-get update`).
set -euo pipefail

PKGS=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  # libraries
  libibverbs-dev librdmacm-dev libdpdk-dev libhwloc-dev prometheus-cpp-dev
  libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  libsystemd-dev nlohmann-json3-dev
  # xxHash, header only (client/placement.cpp compiles it inline)
  libxxhash-dev
  # libsodium: SipHash-2-4 (crypto_shorthash), the memory store's keyed slot hash
  libsodium-dev
  # OpenSSL's libcrypto: HMAC-SHA-256, CRYPTO_memcmp and RAND_bytes of the in-band authentication
  # (protocol/auth.*; never hand-written crypto)
  libssl-dev
  # deploy/ checks (tests/deploy): YAML parsing and the Kubernetes API field names of the manifests
  python3-yaml python3-kubernetes
  # Debian packages of rdmagate (debian/, dpkg-buildpackage in tools/test-all): debhelper with the CMake
  # build, pybuild for the pure-Python client package (pyproject.toml through setuptools)
  debhelper dh-python python3-all python3-setuptools pybuild-plugin-pyproject
  # the Python client package's tests; the man pages' check renders them with groff and man --warnings
  python3-pytest groff-base man-db
  # rxe guest harness (tools/rxe-vm): emulator, initramfs tools, RDMA userspace that goes into the guest
  qemu-system-x86 busybox-static cpio kmod gzip
  ibverbs-utils rdmacm-utils perftest ibverbs-providers libibverbs1 librdmacm1 iproute2
  # comparison peer in perf-compare (ucx_perftest) and the performance gate's syscall counts (strace)
  ucx-utils strace
  # Ceph RADOS backend (store.backend: rados) and its test cluster (tools/ceph-cluster). ceph-common (also a
  # pre-dependency of ceph-osd) has ceph-authtool, which the cluster script runs, and the rados CLI that
  # tests use to alter objects behind the gateway's back and for `rados bench`.
  librados-dev libradospp-dev ceph-mon ceph-osd ceph-common
  # ISA-L: the CRC32C of the values the RADOS backend stores (several crc32 streams folded, as Ceph and SPDK
  # compute it)
  libisal-dev
  # alert rules and dashboard queries: promtool (check/test rules, check metrics) and a real server that
  # scrapes a gateway in the guest
  prometheus
)

# One dpkg-query for all packages keeps the no-op case fast. dpkg-query exits 1 when any package was
# never installed on this machine (the fresh-machine case), so its status must not end the script.
installed=$( (dpkg-query -W -f='${Package} ${Status}\n' "${PKGS[@]}" 2>/dev/null || true) |
  awk '/install ok installed/ {print $1}')
missing=()
for p in "${PKGS[@]}"; do
  grep -qx "$p" <<<"$installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "setup: missing packages (${missing[*]}) and not root; install them or re-run as root" >&2
    exit 1
  fi
else
  SUDO=
fi

echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -o DPkg::Lock::Timeout=600 -y -q)
$SUDO "${APT[@]}" update
$SUDO "${APT[@]}" install --no-install-recommends "${missing[@]}"
echo "setup: done"
