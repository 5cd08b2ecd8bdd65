#!/usr/bin/env bash
# Installs the build tree into a temporary root (DESTDIR, so that even absolute destinations such as Debian's
# /etc stay inside it) and checks what landed there:
#   - the file list, exactly (expected-files.txt, configured with this build's directories); examples/ as
#     a whole under the documentation directory;
#   - the client library: soname, the .so -> .so.1 -> .so.VERSION links, and that its dynamic symbol table
#     holds the C and C++ API only (rdmagate_*, rdmagate::client::*), with the calls a consumer needs;
#   - the public headers: each includes only standard headers or <rdmagate/...> (never DPDK, verbs or a
#     project-internal path) and compiles alone with -I<include dir> (the C header as C and as C++);
#   - rdmagate-client.pc resolves to the installed include and library directories wherever the tree lies;
#   - the systemd unit starts the daemon from where this install put it.
# usage: install_layout_test.sh BUILD_DIR EXPECTED_LIST SOURCE_DIR FULL_LIBDIR FULL_INCLUDEDIR FULL_DOCDIR
set -euo pipefail
build=$1 expected=$2 src=$3 libdir=$4 incdir=$5 docdir=$6

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

if ! DESTDIR="$root/tree" cmake --install "$build" >"$root/install.log" 2>&1; then
  cat "$root/install.log"
  echo "FAIL: cmake --install $build"
  exit 1
fi
tree=$root/tree

# 1. The file list.
(cd "$tree" && find . \( -type f -o -type l \) | sed 's|^\.||' | grep -v "^$docdir/examples/client/" | sort) >"$root/got"
sort "$expected" >"$root/want"
if ! diff -u "$root/want" "$root/got" >"$root/list.diff"; then
  fail "installed files differ from $(basename "$expected") (- expected, + installed):"
  cat "$root/list.diff"
fi
if [ -d "$src/examples" ]; then
  want_ex=$(cd "$src/examples" && find . -type f | sort)
  got_ex=$(cd "$tree$docdir/examples/client" 2>/dev/null && find . -type f | sort)
  [ "$want_ex" = "$got_ex" ] || fail "examples/ is not installed whole under $docdir/examples/client"
fi

# 2. The client library.
lib=$tree$libdir
[ "$(readlink "$lib/librdmagate-client.so")" = librdmagate-client.so.1 ] ||
  fail "librdmagate-client.so does not link to librdmagate-client.so.1"
real=$(readlink "$lib/librdmagate-client.so.1" || true)
[[ "$real" =~ ^librdmagate-client\.so\.[0-9]+\.[0-9]+\.[0-9]+$ ]] && [ -f "$lib/$real" ] ||
  fail "librdmagate-client.so.1 does not link to librdmagate-client.so.X.Y.Z (it links to '$real')"
soname=$(readelf -d "$lib/librdmagate-client.so.1" | sed -nE 's/.*Library soname: \[(.*)\]/\1/p')
[ "$soname" = librdmagate-client.so.1 ] || fail "soname is '$soname', not librdmagate-client.so.1"

nm -D --defined-only "$lib/librdmagate-client.so.1" | awk '{ $1 = ""; $2 = ""; sub(/^  /, ""); print }' |
  sed 's/@.*//' | c++filt >"$root/exports"
n_exports=$(wc -l <"$root/exports")
stray=$(grep -vE '^(rdmagate_[a-z0-9_]+|rdmagate::client::.+|RDMAGATE_CLIENT_[0-9.]+)$' "$root/exports" || true)
[ -z "$stray" ] || fail "librdmagate-client.so.1 exports symbols outside the API:"$'\n'"$stray"
for sym in 'rdmagate::client::Client::create(' 'rdmagate::client::Client::put(' 'rdmagate::client::status_name(' \
           rdmagate_client_create rdmagate_put rdmagate_get rdmagate_delete rdmagate_strerror; do
  grep -qF "$sym" "$root/exports" || fail "librdmagate-client.so.1 does not export $sym"
done
echo "librdmagate-client.so.1: soname $soname, $n_exports exported symbols, all rdmagate_* or rdmagate::client::*"

# 3. The public headers.
inc=$tree$incdir
for h in "$inc"/rdmagate/*; do
  bad=$(grep -nE '^[[:space:]]*#[[:space:]]*include' "$h" |
    grep -vE '#[[:space:]]*include[[:space:]]*<(rdmagate/[a-z_]+\.hp?p?|[a-z_]+(\.h)?)>' || true)
  [ -z "$bad" ] || fail "$(basename "$h") includes something other than a standard or <rdmagate/...> header:"$'\n'"$bad"
  # A translation unit holding only the #include, as a consumer's first line would be.
  tu="#include <rdmagate/$(basename "$h")>"
  case $h in
    *.hpp) c++ -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I"$inc" -x c++ - <<<"$tu" ||
             fail "$(basename "$h") does not compile alone as C++20" ;;
    *.h) cc -std=c99 -pedantic -fsyntax-only -Wall -Wextra -Werror -I"$inc" -x c - <<<"$tu" ||
           fail "$(basename "$h") does not compile alone as C99"
         c++ -std=c++17 -fsyntax-only -Wall -Wextra -Werror -I"$inc" -x c++ - <<<"$tu" ||
           fail "$(basename "$h") does not compile alone as C++" ;;
  esac
done

# 4. pkg-config, from wherever the tree lies.
pc_flags=$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --cflags --libs rdmagate-client) ||
  fail "pkg-config rdmagate-client failed"
pc_inc=$(sed -nE 's/.*-I([^ ]+).*/\1/p' <<<"$pc_flags")
pc_lib=$(sed -nE 's/.*-L([^ ]+).*/\1/p' <<<"$pc_flags")
[ -n "$pc_inc" ] && [ "$(realpath "$pc_inc")" = "$(realpath "$inc")" ] ||
  fail "pkg-config's -I ($pc_inc) is not the installed include directory $inc"
[ -n "$pc_lib" ] && [ "$(realpath "$pc_lib")" = "$(realpath "$lib")" ] ||
  fail "pkg-config's -L ($pc_lib) is not the installed library directory $lib"
grep -q -- '-lrdmagate-client' <<<"$pc_flags" || fail "pkg-config --libs lacks -lrdmagate-client: $pc_flags"

# 5. The systemd unit names the installed daemon and configuration.
unit=$(find "$tree" -name rdmagate.service)
sbin=$(grep -m1 '/sbin/rdmagate$' "$expected")
etc_yaml=$(grep -m1 '/rdmagate/rdmagate.yaml$' "$expected")
grep -qx "ExecStart=$sbin --config $etc_yaml" "$unit" ||
  fail "rdmagate.service: ExecStart is not '$sbin --config $etc_yaml': $(grep ExecStart= "$unit")"

if [ "$fails" -ne 0 ]; then
  echo "install layout: $fails check(s) failed"
  exit 1
fi
echo "install layout: $(wc -l <"$root/got") files as expected under $(dirname "$libdir")/..."
