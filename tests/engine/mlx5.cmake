# Host tests of the mlx5 direct-verbs backend's hot path (dataplane/backend/mlx5_datapath.hpp): the WQE and
# doorbell bytes it writes and the CQEs it parses, on heap rings, against mlx5dv.h's layouts and rdma-core's
# mlx5 provider rules. Header only: no libibverbs or libmlx5 call is made, so only GTest and the repo root.
if(NOT TARGET mlx5_backend_unit_tests)
  add_executable(mlx5_backend_unit_tests
      ${CMAKE_CURRENT_LIST_DIR}/mlx5_wqe_test.cpp
      ${CMAKE_CURRENT_LIST_DIR}/mlx5_cqe_test.cpp)
  target_include_directories(mlx5_backend_unit_tests PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(mlx5_backend_unit_tests PRIVATE rdmagate_warnings GTest::gtest GTest::gtest_main)
  add_test(NAME mlx5_backend_unit_tests COMMAND mlx5_backend_unit_tests --gtest_color=no)
  set_tests_properties(mlx5_backend_unit_tests PROPERTIES LABELS unit TIMEOUT 600)
endif()
