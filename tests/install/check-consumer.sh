#!/usr/bin/env bash
# Builds consumers of an installed rdmagate client library as an application would, from the installed
# tree alone, and checks that they need nothing of rdmagate's own dependencies:
#   1. CMake: tests/install/consumer (C and C++ smoke programs) and examples/ with find_package(rdmagate),
#      CMAKE_PREFIX_PATH set to PREFIX; rdmagate_DIR must resolve inside PREFIX;
#   2. pkg-config: the same sources with `pkg-config --cflags --libs rdmagate-client`, PKG_CONFIG_PATH
#      into PREFIX;
# and for every program: no DPDK, verbs or rdma_cm include directory, define or library on its compile or
# link line; its NEEDED entries are librdmagate-client.so.1 plus C/C++ runtime libraries only, and the
# library resolves to PREFIX's copy; the smoke programs run and call into it.
# usage: check-consumer.sh PREFIX WORKDIR
set -euo pipefail
prefix=$(realpath "$1")
work=$2
repo=$(cd "$(dirname "$0")/../.." && pwd -P)
rm -rf "$work"
mkdir -p "$work"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

pcfile=$(find "$prefix" -name rdmagate-client.pc -print -quit)
config=$(find "$prefix" -name rdmagateConfig.cmake -print -quit)
[ -n "$pcfile" ] || { echo "FAIL: no rdmagate-client.pc under $prefix"; exit 1; }
[ -n "$config" ] || { echo "FAIL: no rdmagateConfig.cmake under $prefix"; exit 1; }
libdir=$(realpath "$(dirname "$pcfile")/..")

# DPDK's, verbs' and rdma_cm's marks on a command line.
FOREIGN='dpdk|rte_|infiniband|ibverbs|rdmacm|libmlx5|-lmlx5|hwloc|-march=corei7|-mssse3|-include'
check_line() { # what line
  local bad
  bad=$(grep -oE -- "$FOREIGN" <<<"$2" | sort -u | tr '\n' ' ' || true)
  [ -z "$bad" ] || fail "$1 carries DPDK/verbs flags ($bad): $2"
}
ALLOWED_NEEDED='^(librdmagate-client\.so\.1|libstdc\+\+\.so\.6|libm\.so\.6|libgcc_s\.so\.1|libc\.so\.6)$'
check_binary() { # program [LD_LIBRARY_PATH]
  local prog=$1 needed stray resolved
  needed=$(readelf -d "$prog" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p')
  grep -qx 'librdmagate-client.so.1' <<<"$needed" || fail "$(basename "$prog") does not need librdmagate-client.so.1"
  stray=$(grep -vE "$ALLOWED_NEEDED" <<<"$needed" | tr '\n' ' ' || true)
  [ -z "$stray" ] || fail "$(basename "$prog") needs more than the client library and the C/C++ runtime: $stray"
  resolved=$(LD_LIBRARY_PATH=${2:-} ldd "$prog" | sed -nE 's/^\s*librdmagate-client\.so\.1 => (\S+).*/\1/p')
  [ -n "$resolved" ] && [ "$(realpath "$resolved")" = "$(realpath "$libdir/librdmagate-client.so.1")" ] ||
    fail "$(basename "$prog"): librdmagate-client.so.1 resolves to '${resolved:-nothing}', not $libdir's"
  echo "  $(basename "$prog"): needs $(tr '\n' ' ' <<<"$needed")"
}
run_smoke() { # program [LD_LIBRARY_PATH]
  local out
  if out=$(LD_LIBRARY_PATH=${2:-} "$1" 2>&1); then echo "  $out"; else fail "$(basename "$1") failed: $out"; fi
}

# 1. CMake, find_package against PREFIX only.
cmake_consumer() { # name source_dir
  local name=$1 dir=$2 b=$work/cmake-$1 found
  if ! cmake -S "$dir" -B "$b" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
       >"$b.configure.log" 2>&1; then
    cat "$b.configure.log"; fail "find_package consumer $name: configure failed"; return
  fi
  found=$(sed -nE 's/^rdmagate_DIR:PATH=(.*)/\1/p' "$b/CMakeCache.txt")
  [ "$(realpath "$found")" = "$(realpath "$(dirname "$config")")" ] ||
    fail "find_package consumer $name found rdmagate in '$found', not in $prefix"
  if ! cmake --build "$b" -v >"$b.build.log" 2>&1; then
    cat "$b.build.log"; fail "find_package consumer $name: build failed"; return
  fi
  while read -r line; do check_line "find_package consumer $name compile/link line" "$line"; done \
    < <(grep -E '(/c\+\+|/cc|/gcc|/g\+\+) ' "$b.build.log")
  echo "find_package consumer $name: built against $found"
}
cmake_consumer smoke "$repo/tests/install/consumer"
for p in "$work"/cmake-smoke/smoke_c "$work"/cmake-smoke/smoke_cpp; do
  [ -x "$p" ] || continue
  check_binary "$p"
  run_smoke "$p"
done
if [ -f "$repo/examples/CMakeLists.txt" ]; then
  cmake_consumer examples "$repo/examples"
  while read -r p; do check_binary "$p"; done < <(find "$work/cmake-examples" -maxdepth 1 -type f -executable)
fi

# 2. pkg-config.
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pcfile")
if ! flags=$(pkg-config --cflags --libs rdmagate-client); then
  fail "pkg-config --cflags --libs rdmagate-client failed"
else
  check_line "pkg-config rdmagate-client" "$flags"
  echo "pkg-config rdmagate-client: $flags"
  srcs=("$repo/tests/install/consumer/smoke.c" "$repo/tests/install/consumer/smoke.cpp")
  [ -d "$repo/examples" ] && while read -r f; do srcs+=("$f"); done < <(find "$repo/examples" -name '*.c' -o -name '*.cpp')
  for src in "${srcs[@]}"; do
    out=$work/pc-$(basename "${src%.*}")-${src##*.}
    case $src in
      *.c) cmd=(cc -std=c99 -Wall -Wextra -Werror -pedantic "$src" -o "$out") ;;
      *.cpp) cmd=(c++ -std=c++20 -Wall -Wextra -Werror "$src" -o "$out") ;;
    esac
    # shellcheck disable=SC2206 # pkg-config's output is a list of words
    cmd+=($flags)
    if "${cmd[@]}" 2>"$out.log"; then
      check_binary "$out" "$libdir"
      case $src in */smoke.*) run_smoke "$out" "$libdir" ;; esac
    else
      cat "$out.log"; fail "pkg-config consumer $(basename "$src"): ${cmd[*]}"
    fi
  done
fi

if [ "$fails" -ne 0 ]; then
  echo "consumers: $fails check(s) failed"
  exit 1
fi
echo "consumers: find_package and pkg-config builds against $prefix need only librdmagate-client.so.1"
