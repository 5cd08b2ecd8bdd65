#!/bin/bash
# Fails when a binary links a shared library whose Debian package is not in the runtime image's list.
# Run in the Dockerfile's build stage (where every -dev package, hence every library, is installed), so a
# new dependency breaks the image build instead of the first start of the container.
#
#   check-runtime-deps.sh BINARY PACKAGE...
#
# Only direct dependencies (DT_NEEDED) are checked: apt installs each listed package's own dependencies.
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 BINARY PACKAGE..." >&2
  exit 2
fi
binary=$1
shift
# Always present in debian:12-slim (essential, or required by apt itself).
allowed=" libc6 libstdc++6 libgcc-s1 $* "

needed=$(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p')
if [ -z "$needed" ]; then
  echo "check-runtime-deps: $binary has no NEEDED entries (not a dynamic ELF?)" >&2
  exit 2
fi

# Where the dynamic loader finds each library (first column soname, third its path).
declare -A path_of
while read -r so _ path _; do
  [ -n "${path:-}" ] && path_of[$so]=$path
done < <(ldd "$binary")

# One dpkg -S for every candidate path (each call reads the whole file database: about a second).
# dpkg records the path a package shipped; with merged /usr that may be /lib/... or /usr/lib/....
declare -A owner
candidates=()
for soname in $needed; do
  path=${path_of[$soname]:-}
  [ -n "$path" ] && [ "$path" != "not" ] || continue
  candidates+=("$path" "${path#/usr}" "/usr$path" "$(readlink -f "$path")")
done
while IFS= read -r line; do
  case "$line" in diversion*) continue ;; esac
  pkg=${line%%:*}
  owner[${line#*: }]=$pkg
done < <(dpkg -S "${candidates[@]}" 2>/dev/null)

missing=0
for soname in $needed; do
  # The dynamic loader itself (libc6), which ldd names by path only; -fPIC objects reference its
  # __tls_get_addr even when the linker relaxed every call away.
  case $soname in ld-linux*.so.*) continue ;; esac
  path=${path_of[$soname]:-}
  if [ -z "$path" ] || [ "$path" = "not" ]; then
    echo "check-runtime-deps: $soname: the loader does not find it" >&2
    missing=1
    continue
  fi
  pkg=
  for p in "$path" "${path#/usr}" "/usr$path" "$(readlink -f "$path")"; do
    pkg=${owner[$p]:-}
    [ -n "$pkg" ] && break
  done
  if [ -z "$pkg" ]; then
    echo "check-runtime-deps: $soname ($path): no Debian package provides it (built locally?)" >&2
    missing=1
  elif [[ "$allowed" != *" $pkg "* ]]; then
    echo "check-runtime-deps: $soname comes from $pkg, which the runtime package list lacks" >&2
    missing=1
  else
    echo "check-runtime-deps: $soname <- $pkg"
  fi
done
exit "$missing"
