# Precompiled headers: they cut the time of every build (scripts/build.sh, build-pkg,
# build-asan, build-tsan; CI has two cores). Boost.Asio and the library's headers take
# 1-3 s to compile in each translation unit before a line of its own; here they are
# compiled once per build for each kind of target:
#   - the library's sources: lib/export_api.hpp, which each of them reads first anyway
#     (lib/CMakeLists.txt);
#   - the library's users in this project (programs, benchmarks):
#     asio_rdma_users_pch below, shared (REUSE_FROM) by all of them: their compile flags
#     are the same (their own definitions, such as BOOST_TEST_DYN_LINK, are not read by
#     these headers); the tests have their own (below, their own optimization) and the
#     fuzz targets theirs (test/fuzz/CMakeLists.txt, libFuzzer's coverage).
# All are PRIVATE to the targets: nothing of them reaches the installed package or its
# consumers. Left out: Boost.Test (its headers read BOOST_TEST_MODULE, which each test
# defines before including them), the examples (they compile as a user's program does)
# and the tests that a header compiles on its own.
# GCC ignores a precompiled header that does not fit (CMake adds -Winvalid-pch, so it says
# so); clang refuses it with an error. -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON: none at all.
# ccache caches these compiles only with sloppiness=pch_defines,time_macros.
set(asio_rdma_pch_headers
  <boost/asio.hpp> <asio_rdma/asio_rdma.hpp>
  <algorithm> <array> <chrono> <cstdint> <cstring> <memory> <string> <thread> <vector>)

# asio_rdma_pch_library(NAME): an object library that only makes the precompiled header of
# asio_rdma_pch_headers, for targets compiled with its flags to reuse (REUSE_FROM). The
# flags it differs by (compile options) are added to it by the caller.
function(asio_rdma_pch_library name)
  file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/${name}.cpp CONTENT "")
  add_library(${name} OBJECT EXCLUDE_FROM_ALL ${PROJECT_BINARY_DIR}/${name}.cpp)
  target_link_libraries(${name} PRIVATE asio_rdma::asio_rdma)
  target_precompile_headers(${name} PRIVATE ${asio_rdma_pch_headers})
endfunction()
asio_rdma_pch_library(asio_rdma_users_pch)

# asio_rdma_use_pch(TARGETS...): those of them that exist use the users' precompiled header.
function(asio_rdma_use_pch)
  foreach(target ${ARGN})
    if(TARGET ${target})
      target_precompile_headers(${target} REUSE_FROM asio_rdma_users_pch)
    endif()
  endforeach()
endfunction()

# The tests' own code is compiled for a fast build rather than fast code: what they
# measure is the library and the programs, which keep the build type's optimization.
# GCC -Og -g1 halves the time of an integration test's translation unit against
# -O2 -g (data_test.cpp: 27 s -> 13 s); clang (the ASan build) gets -O1 with line
# tables, what AddressSanitizer recommends. Debug builds keep their own flags. The
# tests therefore have their own precompiled header (a PCH only fits the flags it
# was made with).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(asio_rdma_test_code_options -Og -g1)
else()
  set(asio_rdma_test_code_options -O1 -gline-tables-only)
endif()
set(ASIO_RDMA_TEST_COMPILE_OPTIONS "$<$<NOT:$<CONFIG:Debug>>:${asio_rdma_test_code_options}>")
asio_rdma_pch_library(asio_rdma_tests_pch)
target_compile_options(asio_rdma_tests_pch PRIVATE "${ASIO_RDMA_TEST_COMPILE_OPTIONS}")

# asio_rdma_use_test_pch(TARGET): a test program, compiled with the tests' options and
# their precompiled header.
function(asio_rdma_use_test_pch target)
  target_compile_options(${target} PRIVATE "${ASIO_RDMA_TEST_COMPILE_OPTIONS}")
  target_precompile_headers(${target} REUSE_FROM asio_rdma_tests_pch)
endfunction()
