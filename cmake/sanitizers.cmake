# Sanitizer and fuzzing builds (scripts/test_sanitized.sh, docs/sanitizers.md).
#
# ASIO_RDMA_SANITIZE: a comma-separated -fsanitize list applied to every target of the build,
#   e.g. "address,undefined" or "thread". Every undefined-behaviour finding is fatal
#   (-fno-sanitize-recover), so a test that triggers one fails.
# ASIO_RDMA_FUZZ: builds the libFuzzer targets of test/fuzz (needs clang). The code a fuzz
#   target runs (the library and the fuzz targets themselves) is compiled with
#   -fsanitize=fuzzer-no-link too, so the fuzzers see its coverage: asio_rdma_fuzz_coverage().
set(ASIO_RDMA_SANITIZE "" CACHE STRING "Sanitizers for every target (address,undefined or thread)")
option(ASIO_RDMA_FUZZ "Build the libFuzzer targets in test/fuzz (clang only)" OFF)

if(ASIO_RDMA_SANITIZE)
  # Line tables are all a sanitizer report needs (file:line in every frame); full debug
  # information made the two sanitizer builds about 4 minutes slower in CI.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set(asio_rdma_debug_level -gline-tables-only)
  else()
    set(asio_rdma_debug_level -g1)
  endif()
  add_compile_options(-fsanitize=${ASIO_RDMA_SANITIZE} -fno-omit-frame-pointer ${asio_rdma_debug_level})
  add_link_options(-fsanitize=${ASIO_RDMA_SANITIZE})
  if(ASIO_RDMA_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()

if(ASIO_RDMA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "ASIO_RDMA_FUZZ needs clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}")
  endif()
endif()

# asio_rdma_fuzz_coverage(TARGETS...): with ASIO_RDMA_FUZZ, the targets' code reports its
# coverage to libFuzzer. Only the code the fuzz targets run: the tests, programs and
# examples of the same build compile faster without it (clang 16, ASan + UBSan, two
# cores: the whole build 637 s -> 616 s; test/integration/data_test.cpp alone 49 s -> 40 s),
# and in their runs the coverage callbacks only cost time.
function(asio_rdma_fuzz_coverage)
  if(ASIO_RDMA_FUZZ)
    foreach(target ${ARGN})
      target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
    endforeach()
  endif()
endfunction()
