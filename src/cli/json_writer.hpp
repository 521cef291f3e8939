#ifndef KVCANARY_CLI_JSON_WRITER_HPP
#define KVCANARY_CLI_JSON_WRITER_HPP

// JSON output written straight to a stream, integers as they come: a JSON document of a large output cost
// ~16 bytes an entry and its text as much again, which made printing the largest part of the tool's memory.

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <ostream>
#include <vector>

namespace kvcanary {
namespace cli {

inline void write_number(std::ostream& out, std::int64_t value) {
  char text[24];
  const char* end = std::to_chars(text, text + sizeof text, value).ptr;
  out.write(text, end - text);
}

// The members of one JSON object, each after a comma but the first (the braces are the caller's).
class Members {
 public:
  explicit Members(std::ostream& out) : out_(out) {}

  Members& scalar(const char* name, std::int64_t value) {
    key(name);
    write_number(out_, value);
    return *this;
  }

  // The first `count` values (at most all of them).
  Members& array(const char* name, const std::vector<std::int64_t>& values, std::size_t count) {
    key(name);
    out_ << '[';
    count = std::min(count, values.size());
    for (std::size_t i = 0; i < count; ++i) {
      if (i > 0) out_ << ',';
      write_number(out_, values[i]);
    }
    out_ << ']';
    return *this;
  }

  // A member whose value `write(out)` writes.
  template <class Write>
  Members& member(const char* name, Write&& write) {
    key(name);
    write(out_);
    return *this;
  }

 private:
  void key(const char* name) {
    out_ << (first_ ? "\"" : ",\"") << name << "\":";
    first_ = false;
  }

  std::ostream& out_;
  bool first_ = true;
};

}  // namespace cli
}  // namespace kvcanary

#endif
