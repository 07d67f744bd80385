# The Protocol Buffers messages of examples/rpc_kv (examples/rpc_kv.proto), which the
# typed-call tests use too: one target, made by whichever of examples/ and test/ comes
# first (either may be left out of a build). Needs libprotobuf-dev and protobuf-compiler.
if(NOT TARGET rpc_kv_messages)
  find_package(Protobuf REQUIRED)
  file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/rpc_kv_messages)
  add_library(rpc_kv_messages STATIC ${PROJECT_SOURCE_DIR}/examples/rpc_kv.proto)
  protobuf_generate(TARGET rpc_kv_messages LANGUAGE cpp
                    IMPORT_DIRS ${PROJECT_SOURCE_DIR}/examples
                    PROTOC_OUT_DIR ${PROJECT_BINARY_DIR}/rpc_kv_messages)
  target_link_libraries(rpc_kv_messages PUBLIC protobuf::libprotobuf)
  target_include_directories(rpc_kv_messages PUBLIC ${PROJECT_BINARY_DIR}/rpc_kv_messages)
endif()
