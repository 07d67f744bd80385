// Storing received files without a device: the commit methods (renameat2
// RENAME_NOREPLACE, and link + unlink for filesystems that refuse rename
// flags, such as NFS, CIFS and 9p), each overwrite policy by each method, the
// probe that chooses the method, and NFS's lost-reply case of link.
#define BOOST_TEST_MODULE partial_file
#include <boost/test/unit_test.hpp>

#include "../../lib/file_transfer/partial_file.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

namespace ar = asio_rdma;
namespace fs = std::filesystem;
using ar::commit_method;
using ar::overwrite_policy;
using ar::detail::partial_file;
using ar::detail::unique_fd;

namespace {

struct directory {
  fs::path path;
  unique_fd fd;
  directory() {
    char name[] = "/tmp/asio_rdma_partial_XXXXXX";
    BOOST_REQUIRE(::mkdtemp(name) != nullptr);
    path = name;
    fd = unique_fd(::open(name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    BOOST_REQUIRE(fd);
  }
  ~directory() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  /// The names in the directory, sorted.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string read(const std::string& name) const {
    std::ifstream in(path / name, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
  }
};

/// A temporary for `name` holding `text`.
partial_file received(const directory& d, const std::string& name, const std::string& text) {
  ar::error_code ec;
  std::vector<std::string> components{name};
  auto f = partial_file::create(d.fd.get(), components, ec);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  f.write_at(std::as_bytes(std::span(text.data(), text.size())), 0, ec);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  return f;
}

const commit_method both_methods[] = {commit_method::rename_noreplace, commit_method::link_unlink};

} // namespace

BOOST_AUTO_TEST_CASE(probe_leaves_nothing_and_finds_a_working_method) {
  directory d;
  for (bool durable : {true, false}) {
    ar::error_code ec;
    const char* step = "unset";
    auto method = ar::detail::probe_commit_method(d.fd.get(), durable, step, ec);
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(std::string(step).empty());
    // This machine's /tmp is a local filesystem, which has RENAME_NOREPLACE.
    BOOST_TEST((method == commit_method::rename_noreplace));
    BOOST_TEST(d.names().empty());
  }
}

BOOST_AUTO_TEST_CASE(probe_names_the_step_that_fails) {
  directory d;
  // Permission bits do not stop root; a removed directory (still open)
  // cannot gain entries for anyone.
  fs::path gone = d.path / "gone";
  fs::create_directory(gone);
  unique_fd fd(::open(gone.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  BOOST_REQUIRE(fd);
  fs::remove(gone);
  ar::error_code ec;
  const char* step = "";
  ar::detail::probe_commit_method(fd.get(), true, step, ec);
  BOOST_TEST((ec == boost::system::errc::no_such_file_or_directory), ec.message());
  BOOST_TEST(std::string(step) == "create a file");
}

BOOST_AUTO_TEST_CASE(refuse_stores_a_new_name_by_either_method) {
  for (auto method : both_methods) {
    directory d;
    auto f = received(d, "a.bin", "data");
    ar::error_code ec;
    std::string stored;
    f.commit(0640, true, overwrite_policy::refuse, method, stored, ec);
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(stored == "a.bin");
    BOOST_TEST(d.names() == std::vector<std::string>{"a.bin"}); // no temporary left
    BOOST_TEST(d.read("a.bin") == "data");
    BOOST_TEST(((fs::status(d.path / "a.bin").permissions() & fs::perms::all) ==
                (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read)));
    struct stat st {};
    BOOST_REQUIRE(::stat((d.path / "a.bin").c_str(), &st) == 0);
    BOOST_TEST(st.st_nlink == 1u); // link + unlink leaves one name
  }
}

BOOST_AUTO_TEST_CASE(refuse_keeps_an_existing_name_by_either_method) {
  for (auto method : both_methods) {
    directory d;
    d.write("a.bin", "old");
    auto f = received(d, "a.bin", "new");
    ar::error_code ec;
    std::string stored;
    f.commit(0600, false, overwrite_policy::refuse, method, stored, ec);
    BOOST_TEST((ec == ar::errc::file_exists), ec.message());
    BOOST_TEST(d.names() == std::vector<std::string>{"a.bin"}); // temporary removed
    BOOST_TEST(d.read("a.bin") == "old");
  }
}

BOOST_AUTO_TEST_CASE(keep_both_numbers_the_new_file_by_either_method) {
  for (auto method : both_methods) {
    directory d;
    d.write("a.tar.gz", "old");
    d.write("a.tar.1.gz", "older");
    auto f = received(d, "a.tar.gz", "new");
    ar::error_code ec;
    std::string stored;
    f.commit(0600, false, overwrite_policy::keep_both, method, stored, ec);
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(stored == "a.tar.2.gz");
    BOOST_TEST(d.read("a.tar.gz") == "old");
    BOOST_TEST(d.read("a.tar.1.gz") == "older");
    BOOST_TEST(d.read("a.tar.2.gz") == "new");
    BOOST_TEST(d.names().size() == 3u);
  }
}

BOOST_AUTO_TEST_CASE(replace_renames_over_an_existing_name) {
  for (auto method : both_methods) {
    directory d;
    d.write("a.bin", "old");
    auto f = received(d, "a.bin", "new");
    ar::error_code ec;
    std::string stored;
    f.commit(0600, true, overwrite_policy::replace, method, stored, ec);
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(d.read("a.bin") == "new");
    BOOST_TEST(d.names() == std::vector<std::string>{"a.bin"});
  }
}

BOOST_AUTO_TEST_CASE(link_that_answered_eexist_after_succeeding_counts_as_stored) {
  // NFS: a LINK retransmitted after its reply was lost answers EEXIST though
  // the first one made the link. Reproduced by making that link beforehand:
  // the temporary then has two links, the second being the target.
  directory d;
  auto f = received(d, "a.bin", "data");
  std::string temporary;
  for (const auto& name : d.names())
    temporary = name;
  BOOST_REQUIRE(temporary.ends_with(".part"));
  ar::error_code ec;
  // The data must be complete in the file before the link is made.
  BOOST_REQUIRE(::link((d.path / temporary).c_str(), (d.path / "a.bin").c_str()) == 0);
  std::string stored;
  f.commit(0600, false, overwrite_policy::refuse, commit_method::link_unlink, stored, ec);
  BOOST_TEST(!ec, ec.message());
  BOOST_TEST(stored == "a.bin");
  BOOST_TEST(d.names() == std::vector<std::string>{"a.bin"});
  BOOST_TEST(d.read("a.bin") == "data");
}

BOOST_AUTO_TEST_CASE(a_failed_commit_names_its_step) {
  directory d;
  d.write("a.bin", "old");
  auto f = received(d, "a.bin", "new");
  ar::error_code ec;
  std::string stored;
  f.commit(0600, false, overwrite_policy::refuse, commit_method::link_unlink, stored, ec);
  BOOST_TEST((ec == ar::errc::file_exists));
  BOOST_TEST(std::string(f.failed_step()) == "link to the final name");
}
