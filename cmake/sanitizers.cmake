# Sanitizer and fuzzing builds (scripts/test_sanitized.sh, docs/sanitizers.md).
#
# ASIO_RDMA_SANITIZE: a comma-separated -fsanitize list applied to every target of the build,
#   e.g. "address,undefined" or "thread". Every undefined-behaviour finding is fatal
#   (-fno-sanitize-recover), so a test that triggers one fails.
# ASIO_RDMA_FUZZ: builds the libFuzzer targets of test/fuzz (needs clang). Everything else is
#   then compiled with -fsanitize=fuzzer-no-link too, so the fuzzers see the library's coverage.
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
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
