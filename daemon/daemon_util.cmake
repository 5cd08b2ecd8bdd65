# The daemon's verbs-free pieces: the structured logger (daemon/log.*), the command-line parser
# (daemon/gateway_cli.*), the systemd watchdog's decision (daemon/watchdog.*) and the thread placement
# check (daemon/placement.*). No EAL, verbs or rdma_cm, so the host unit tests (tests/daemon) build them in
# every configuration, including RDMAGATE_UNIT_ONLY where daemon/ itself is left out. Included (once)
# from daemon/CMakeLists.txt or, when that folder is filtered out, from tests/daemon.
include_guard(GLOBAL)

# The version --version prints: the project version, plus `git describe` at configure time when the source
# is a git checkout ("-dirty" when it had local changes then). Re-run cmake to refresh it.
find_package(Git QUIET)
set(RDMAGATE_DAEMON_VERSION "${PROJECT_VERSION}")
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} describe --always --dirty --tags
                  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE _rdmagate_describe
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rdmagate_describe_rc)
  if(_rdmagate_describe_rc EQUAL 0 AND _rdmagate_describe)
    set(RDMAGATE_DAEMON_VERSION "${PROJECT_VERSION} (${_rdmagate_describe})")
  endif()
endif()

add_library(rdmagate_daemon_util STATIC ${CMAKE_CURRENT_LIST_DIR}/log.cpp ${CMAKE_CURRENT_LIST_DIR}/gateway_cli.cpp
                                       ${CMAKE_CURRENT_LIST_DIR}/watchdog.cpp ${CMAKE_CURRENT_LIST_DIR}/placement.cpp)
target_include_directories(rdmagate_daemon_util PUBLIC ${PROJECT_SOURCE_DIR})
# conf::LogLevel / LogFormat and their names.
target_link_libraries(rdmagate_daemon_util PUBLIC rdmagate_conf PRIVATE rdmagate_warnings)
target_compile_definitions(rdmagate_daemon_util PRIVATE RDMAGATE_DAEMON_VERSION="${RDMAGATE_DAEMON_VERSION}")
