#!/usr/bin/env bash
# A user's plain build: the compiler and pkg-config, nothing else.
#   test/consumer/build_pkg_config.sh OUTPUT [--static]
# PKG_CONFIG_PATH selects an install prefix (unset: the installed .deb).
set -euo pipefail
out=$1
static=${2:-}
here=$(dirname "$0")
# shellcheck disable=SC2046 # pkg-config prints one word per flag
${CXX:-g++} -std=c++20 -o "$out" "$here/consumer.cpp" \
  $(pkg-config --cflags asio-rdma) $(pkg-config $static --libs asio-rdma)
