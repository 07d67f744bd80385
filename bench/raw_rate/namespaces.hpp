// The benchmark's own pair of network namespaces joined by a veth pair (root needed).
#pragma once

#include <string>

namespace raw_rate {

class veth_namespaces {
public:
  /// Creates ns_a/ns_b (names with the pid) and the veth pair if_a/if_b; throws on failure.
  veth_namespaces();
  /// Deletes both namespaces (and with them the veth pair).
  ~veth_namespaces();
  veth_namespaces(const veth_namespaces&) = delete;
  veth_namespaces& operator=(const veth_namespaces&) = delete;

  std::string ns_a, ns_b, if_a, if_b, mac_a;
};

/// Switches the calling thread into a named network namespace until destroyed.
class enter_namespace {
public:
  explicit enter_namespace(const std::string& name);
  ~enter_namespace();
  enter_namespace(const enter_namespace&) = delete;
  enter_namespace& operator=(const enter_namespace&) = delete;

private:
  int original_ = -1;
};

} // namespace raw_rate
