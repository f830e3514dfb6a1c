#include "core/names.h"

#include <map>
#include <mutex>

namespace murmur {
namespace {

struct Names {
  std::mutex mu;  // guards by_key (registrations may come from any static initializer)
  std::map<std::string, std::vector<std::string>, std::less<>> by_key;
};

// Built on first use, so registrations from other files' static initializers find it ready.
Names& names() {
  static Names n;
  return n;
}

}  // namespace

bool register_names(std::string_view key, const std::vector<std::string_view>& list) {
  Names& n = names();
  std::lock_guard lock(n.mu);
  auto& known = n.by_key[std::string(key)];
  for (std::string_view name : list) known.emplace_back(name);
  return true;
}

std::vector<std::string> registered_names(std::string_view key) {
  Names& n = names();
  std::lock_guard lock(n.mu);
  const auto it = n.by_key.find(key);
  return it == n.by_key.end() ? std::vector<std::string>{} : it->second;
}

}  // namespace murmur
