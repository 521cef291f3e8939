#ifndef KVCANARY_CLI_CLI_ERROR_HPP
#define KVCANARY_CLI_CLI_ERROR_HPP

// The two ways kvcanary refuses to work, both exit status 2 with one line on stderr (SPEC §5):
// a bad command line, and an input it rejects (unreadable file, malformed JSON, missing key, wrong
// type, out-of-range value, or a call the library would reject).

#include <stdexcept>
#include <string>

namespace kvcanary {
namespace cli {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class RejectedInput : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace cli
}  // namespace kvcanary

#endif
