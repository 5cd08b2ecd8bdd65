# The connection lifecycle (teardown state machine): pure C++, no verbs, rdma_cm or EAL, so it builds in every
# configuration and its unit tests run on the host under ASan/UBSan. The engine links it from rdmagate_control.
# Included (once) from control/CMakeLists.txt or, when that folder is filtered out, from tests/engine.
include_guard(GLOBAL)
# Admission per source address (admission.cpp) is as pure and lives here for the same reason.
add_library(rdmagate_lifecycle STATIC ${CMAKE_CURRENT_LIST_DIR}/connection_lifecycle.cpp
                                      ${CMAKE_CURRENT_LIST_DIR}/admission.cpp)
target_include_directories(rdmagate_lifecycle PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(rdmagate_lifecycle PRIVATE rdmagate_warnings)
