// Helpers for visitors that walk the `describe(v, struct)` functions of core/config.h: which
// field types are nested sections, and the plain-text forms shared by every reader and writer
// (a number written by to_yaml must read back bit for bit). Header-only, no state.
#pragma once

#include <cmath>
#include <concepts>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

#include "core/config.h"

namespace murmur::config_detail {

// Counts nothing; exists so that `Section` can ask "does describe(v, T&) exist?".
struct NullVisitor {
  template <class T, class... C>
  void operator()(std::string_view, T&, C&&...) {}
};

// A nested config struct: a type with a describe() overload, read and written as a mapping.
template <class T>
concept Section = requires(NullVisitor& v, T& t) { describe(v, t); };

// A mapping from integer keys to values, e.g. network.stragglers {3: 2.0}. Range applies to the
// values; keys must be non-negative integers (ranks).
template <class T>
struct IsIntMap : std::false_type {};
template <class V>
struct IsIntMap<std::map<int, V>> : std::true_type {};
template <class T>
concept IntMap = IsIntMap<T>::value;

// The names of a section's keys in describe() order, for "unknown key (known: a, b)" messages.
struct KeyLister {
  std::string keys;
  template <class T, class... C>
  void operator()(std::string_view key, T&, C&&...) {
    if (!keys.empty()) keys += ", ";
    keys += key;
  }
};

template <Section T>
std::string known_keys(const T& section) {
  KeyLister lister;
  T copy = section;  // describe() takes a mutable reference; a copy keeps `section` const
  describe(lister, copy);
  return lister.keys;
}

// Shortest text that parses back to exactly `x` (YAML 1.2 spelling for the non-finite values).
inline std::string format_double(double x) {
  if (std::isnan(x)) return ".nan";
  if (std::isinf(x)) return x > 0 ? ".inf" : "-.inf";
  return fmt::format("{}", x);
}

// Range bounds as the messages print them: 1 -> "1", 1e6 -> "1e+06".
inline std::string format_bound(double x) { return fmt::format("{:g}", x); }

}  // namespace murmur::config_detail
