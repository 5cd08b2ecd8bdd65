# rdmagate_engine_rte_ring: DPDK's ring headers and librte_ring only (rte_ring_init and the memsize helpers),
# for host tests of code that formats rings on plain heap memory without EAL. librte_eal is linked solely so
# a test can show that EAL never initialised (rte_lcore_id() == LCORE_ID_ANY). A minimal target rather than
# PkgConfig::DPDK keeps the full DPDK link line and its -march=corei7 out.
find_library(RDMAGATE_RTE_RING_LIB rte_ring REQUIRED HINTS ${DPDK_LIBRARY_DIRS})
find_library(RDMAGATE_RTE_EAL_LIB rte_eal REQUIRED HINTS ${DPDK_LIBRARY_DIRS})
add_library(rdmagate_engine_rte_ring INTERFACE)
target_include_directories(rdmagate_engine_rte_ring SYSTEM INTERFACE ${DPDK_INCLUDE_DIRS})
# DPDK headers expect rte_config.h first and at least SSSE3 (x86-64-v2 from rdmagate_warnings has it).
target_compile_options(rdmagate_engine_rte_ring INTERFACE -include rte_config.h -mssse3)
target_link_libraries(rdmagate_engine_rte_ring INTERFACE ${RDMAGATE_RTE_RING_LIB} ${RDMAGATE_RTE_EAL_LIB})
