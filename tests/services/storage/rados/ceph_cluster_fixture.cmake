# The ctest fixture "ceph_cluster": a real single-node Ceph cluster (tools/ceph-cluster, memstore, one pool
# "rdmagate", client.rdmagate) in ${CMAKE_BINARY_DIR}/ceph-cluster for the tests of the RADOS backend.
# Included from tests/services/CMakeLists.txt. A test that needs the cluster sets
#   FIXTURES_REQUIRED ceph_cluster
# and reads ${RDMAGATE_CEPH_CLUSTER_DIR}/env (CEPH_CONF, RDMAGATE_CEPH_POOL, RDMAGATE_CEPH_KEYRING, ...).
# Defined only where Ceph is installed (Debian: tools/setup-debian.sh): librados for rdmagate-ceph-probe,
# ceph-mon and ceph-osd for the daemons, the rados CLI for the self-test.
get_filename_component(_rdmagate_root "${CMAKE_CURRENT_LIST_DIR}/../../../.." ABSOLUTE)
find_path(RADOS_INCLUDE_DIR rados/librados.h)
find_library(RADOS_LIBRARY rados)
find_program(CEPH_MON_EXECUTABLE ceph-mon)
find_program(CEPH_OSD_EXECUTABLE ceph-osd)
find_program(RADOS_EXECUTABLE rados)

# tools/CMakeLists.txt defines rdmagate-ceph-probe, but unit-only builds configure no tools/ folder: then the
# probe is built from here, into the same place (build/<dir>/tools/, where tools/ceph-cluster looks).
if(NOT TARGET rdmagate-ceph-probe AND RADOS_INCLUDE_DIR AND RADOS_LIBRARY)
  add_executable(rdmagate-ceph-probe ${_rdmagate_root}/tools/ceph-probe.cpp)
  target_include_directories(rdmagate-ceph-probe SYSTEM PRIVATE ${RADOS_INCLUDE_DIR})
  target_link_libraries(rdmagate-ceph-probe PRIVATE ${RADOS_LIBRARY} rdmagate_warnings)
  set_target_properties(rdmagate-ceph-probe PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools)
endif()

if(TARGET rdmagate-ceph-probe AND CEPH_MON_EXECUTABLE AND CEPH_OSD_EXECUTABLE AND RADOS_EXECUTABLE)
  set(RDMAGATE_CEPH_CLUSTER_DIR ${CMAKE_BINARY_DIR}/ceph-cluster)
  set(_ceph_cluster ${_rdmagate_root}/tools/ceph-cluster)
  set(_ceph_probe_env RDMAGATE_CEPH_PROBE=$<TARGET_FILE:rdmagate-ceph-probe>)

  # A cluster left behind by an interrupted run is stopped first; start refuses to replace a running one.
  add_test(NAME ceph_cluster_start
           COMMAND bash -c [=["$0" stop --dir "$1" && exec "$0" start --dir "$1" --store memstore]=]
                   ${_ceph_cluster} ${RDMAGATE_CEPH_CLUSTER_DIR})
  set_tests_properties(ceph_cluster_start PROPERTIES FIXTURES_SETUP ceph_cluster LABELS unit TIMEOUT 120
                                                     ENVIRONMENT "${_ceph_probe_env}")

  add_test(NAME ceph_cluster_stop COMMAND ${_ceph_cluster} stop --dir ${RDMAGATE_CEPH_CLUSTER_DIR})
  set_tests_properties(ceph_cluster_stop PROPERTIES FIXTURES_CLEANUP ceph_cluster LABELS unit TIMEOUT 60)

  # The fixture's restricted client really reads and writes its pool: a 1 MiB random object goes
  # put/stat/get/rm through the rados CLI as client.rdmagate and comes back byte for byte.
  add_test(NAME ceph_cluster_selftest
           COMMAND bash -c [=[
set -euo pipefail
dir=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$dir/env"
r() { timeout 60 rados -c "$CEPH_CONF" --id "$RDMAGATE_CEPH_ID" --keyring "$RDMAGATE_CEPH_KEYRING" -p "$RDMAGATE_CEPH_POOL" "$@"
}
head -c 1048576 /dev/urandom >"$tmp/in"
r put ceph_cluster_selftest "$tmp/in"
r stat ceph_cluster_selftest | grep -q "size 1048576"
r get ceph_cluster_selftest "$tmp/out"
cmp "$tmp/in" "$tmp/out"
r rm ceph_cluster_selftest
if r stat ceph_cluster_selftest 2>/dev/null
then echo "object still there after rm" >&2
  exit 1
fi
echo "ceph_cluster_selftest: 1 MiB put/stat/get/rm as $RDMAGATE_CEPH_CLIENT ok"
]=] ceph_cluster_selftest ${RDMAGATE_CEPH_CLUSTER_DIR})
  set_tests_properties(ceph_cluster_selftest PROPERTIES FIXTURES_REQUIRED ceph_cluster LABELS unit TIMEOUT 120)

  # kill-osd/start-osd on a BlueStore cluster of its own (own dir and ports, beside the fixture's).
  add_test(NAME ceph_cluster_osd_restart
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/osd_restart_test.sh --dir ${CMAKE_BINARY_DIR}/ceph-cluster-osd-restart)
  set_tests_properties(ceph_cluster_osd_restart PROPERTIES LABELS unit TIMEOUT 240 SKIP_RETURN_CODE 77
                                                           ENVIRONMENT "${_ceph_probe_env}")
else()
  message(STATUS "Ceph test cluster fixture: off (needs librados-dev, ceph-mon, ceph-osd, ceph-common)")
endif()
