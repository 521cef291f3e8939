#include "json_text.hpp"

#include "cli_error.hpp"
#include "limits.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <utility>
#include <vector>

namespace kvcanary {
namespace cli {

namespace {

using json = nlohmann::json;

// A case needs 4 levels (steps, case, matrix, row); the limit keeps release() and dump() recursion shallow.
constexpr std::size_t kMaxNesting = 32;

// Frees children before their parents, so that no container is destroyed while it still holds values.
void release(json& value) noexcept {
  if (value.is_array()) {
    for (json& child : value) release(child);
    value.get_ref<json::array_t&>().clear();
  } else if (value.is_object()) {
    for (auto& item : value.get_ref<json::object_t&>()) release(item.second);
    value.get_ref<json::object_t&>().clear();
  }
}

// Reads at most kMaxInputBytes + 1 bytes, so that a huge or endless input stops at the limit.
std::string read_bounded(std::istream& in, const std::string& name) {
  std::string text;
  std::vector<char> chunk(std::size_t{1} << 16);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    if (static_cast<std::int64_t>(text.size()) > kMaxInputBytes)
      throw RejectedInput(name + ": larger than kvcanary's input limit of " + std::to_string(kMaxInputBytes) +
                          " bytes");
  }
  if (in.bad()) throw RejectedInput(name + ": cannot read");
  return text;
}

std::string read_text(const std::string& path) {
  if (path == "-") return read_bounded(std::cin, "-");
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) throw RejectedInput(path + ": cannot read: is a directory");
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw RejectedInput(path + ": cannot open: " + std::strerror(errno));
  return read_bounded(stream, path);
}

// nlohmann's DOM building (json_sax_dom_parser) plus the checks it lacks: duplicate keys and nesting.
class StrictDomBuilder final : public json::json_sax_t {
 public:
  explicit StrictDomBuilder(json& root) : root_(root) {}
  const std::string& error() const { return error_; }

  bool null() override { return accept(nullptr); }
  bool boolean(bool value) override { return accept(value); }
  bool number_integer(number_integer_t value) override { return accept(value); }
  bool number_unsigned(number_unsigned_t value) override { return accept(value); }
  bool number_float(number_float_t value, const string_t&) override { return accept(value); }
  bool string(string_t& value) override { return accept(std::move(value)); }
  bool binary(binary_t& value) override { return accept(json::binary(std::move(value))); }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& key) override {
    json::object_t& object = open_.back()->get_ref<json::object_t&>();
    const auto inserted = object.emplace(key, nullptr);
    if (!inserted.second)
      return fail("duplicate key " + json(key).dump(-1, ' ', true, json::error_handler_t::replace) +
                  " (a key may appear once per object)");
    slot_ = &inserted.first->second;
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    return fail(std::string("malformed JSON: ") + e.what());
  }

 private:
  // Where the next value goes: the root, the end of the open array, or the slot of the last key.
  json& add(json&& value) {
    if (open_.empty()) return root_ = std::move(value);
    json& parent = *open_.back();
    if (!parent.is_array()) return *slot_ = std::move(value);
    json::array_t& array = parent.get_ref<json::array_t&>();
    array.push_back(std::move(value));
    return array.back();
  }

  bool accept(json&& value) {
    add(std::move(value));
    return true;
  }

  bool open(json&& container) {
    if (open_.size() >= kMaxNesting) return fail("JSON nested deeper than " + std::to_string(kMaxNesting) + " levels");
    open_.push_back(&add(std::move(container)));
    return true;
  }

  bool close() {
    open_.pop_back();
    return true;
  }

  bool fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  json& root_;
  std::vector<json*> open_;  // the open arrays and objects, outermost first
  json* slot_ = nullptr;
  std::string error_;
};

}  // namespace

JsonDocument::~JsonDocument() { release(root_); }

JsonDocument read_json_file(const std::string& path) {
  const std::string text = read_text(path);
  const auto nul = text.find('\0');
  if (nul != std::string::npos)
    throw RejectedInput(path + ": malformed JSON: NUL byte at offset " + std::to_string(nul));
  JsonDocument document;
  StrictDomBuilder builder(document.root());
  if (!json::sax_parse(text.begin(), text.end(), &builder)) throw RejectedInput(path + ": " + builder.error());
  return document;
}

}  // namespace cli
}  // namespace kvcanary
