// asio-rdma: checking the relative names of a file transfer (pure functions).
#pragma once

#include <asio_rdma/error.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace asio_rdma::detail {

/// Longest single component of a received name (a little under POSIX
/// NAME_MAX; the temporary of an unfinished file, NAME.XXXXXX.part, shortens
/// NAME where it must).
inline constexpr std::size_t max_name_component = 250;

/// Splits a name from the wire into its components, refusing everything that
/// could leave the receiving directory or be ambiguous: empty names, absolute
/// names, empty, "." and ".." components, NUL bytes, components longer than
/// max_name_component, more than 4096 bytes. errc::protocol_error then, and
/// `components` is left empty.
std::vector<std::string> split_relative_name(std::string_view name, error_code& ec);

} // namespace asio_rdma::detail
