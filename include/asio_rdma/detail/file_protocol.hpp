// Forwarding header, in the source tree only (not installed): the file
// protocol is internal and lives in lib/file_transfer/protocol.hpp. Kept
// until bench/crc32c_rate includes it from there; then delete this file and
// its EXCLUDE in cmake/install.cmake.
#pragma once

#include "../../../lib/file_transfer/protocol.hpp"
