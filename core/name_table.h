// A table of named entries, the way a room lists what one of its config keys takes (models, data
// sets, compressors, schedules, ...): a constant array of structs with a `name` member, searched
// by name. One lookup and one error message for all of them, and the names for core/names.h.
// Header-only; pure functions of the table.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur {

// The names of `table`'s entries, in table order.
template <class Entry>
std::vector<std::string_view> names_of(std::span<const Entry> table) {
  std::vector<std::string_view> out;
  out.reserve(table.size());
  for (const Entry& e : table) out.emplace_back(e.name);
  return out;
}

// The entry of `table` named `name`. Throws ConfigError "<key>: unknown <what> '<name>' (a | b)".
template <class Entry>
const Entry& find_named(std::span<const Entry> table, std::string_view name, std::string_view key,
                        std::string_view what) {
  for (const Entry& e : table) {
    if (e.name == name) return e;
  }
  throw ConfigError(fmt::format("{}: unknown {} '{}' ({})", key, what, name,
                                fmt::join(names_of(table), " | ")));
}

}  // namespace murmur
