#ifndef KVCANARY_CLI_JSON_TEXT_HPP
#define KVCANARY_CLI_JSON_TEXT_HPP

// A case file's text, read and parsed strictly: at most kMaxInputBytes, no NUL byte (nlohmann takes one
// for the end of the text and would ignore what follows), nesting at most 32 deep, and no key twice in
// one object (nlohmann would keep the last silently).

#include <nlohmann/json.hpp>

#include <string>

namespace kvcanary {
namespace cli {

// A parsed document that frees its values without allocating. nlohmann's own destructor allocates a
// copy of the largest array's elements to avoid recursion; under memory pressure that throws inside a
// noexcept destructor, i.e. std::terminate. Our nesting limit makes plain recursion safe instead.
class JsonDocument {
 public:
  JsonDocument() = default;
  JsonDocument(JsonDocument&&) = default;
  JsonDocument& operator=(JsonDocument&&) = delete;
  ~JsonDocument();

  nlohmann::json& root() { return root_; }
  const nlohmann::json& root() const { return root_; }

 private:
  nlohmann::json root_;
};

// Reads `path` ("-" is stdin) and parses it; throws RejectedInput with one line naming the file.
JsonDocument read_json_file(const std::string& path);

}  // namespace cli
}  // namespace kvcanary

#endif
