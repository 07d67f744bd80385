#include "error_message.hpp"

#include <deque>
#include <mutex>

namespace asio_rdma::detail {
namespace {

// A category equal to rdma_category() (Boost.System compares categories that have an
// id by that id) with one message of its own: an error_code carries a category and a
// value, no text, so the text lives in a category made for it.
class message_category final : public boost::system::error_category {
public:
  message_category(int value, std::string message)
      : error_category(rdma_category_id), value_(value), message_(std::move(message)) {}
  const char* name() const noexcept override { return rdma_category().name(); }
  std::string message(int value) const override {
    return value == value_ ? message_ : rdma_category().message(value);
  }
  int value() const noexcept { return value_; }
  const std::string& text() const noexcept { return message_; }

private:
  int value_;
  std::string message_;
};

constexpr std::size_t max_messages = 256;

} // namespace

error_code with_message(errc code, std::string message) {
  // Categories must outlive every error_code naming them: they are never freed.
  static std::mutex mutex;
  static std::deque<message_category> made;
  const int value = static_cast<int>(code);
  std::lock_guard lock(mutex);
  for (const auto& category : made)
    if (category.value() == value && category.text() == message)
      return error_code(value, category);
  if (made.size() >= max_messages)
    return code;
  return error_code(value, made.emplace_back(value, std::move(message)));
}

} // namespace asio_rdma::detail
