// The names a config key takes, registered by the room that owns them: algorithm.name by
// optimizers' registry, topology.graph by topology's, transport.backend by transport's factory,
// and so on (one registration per key, in each room's registry file). The config loader checks a
// value against them, so core lists no name of a room above it. Registration happens during
// static initialization; reading after main() has started. A binary that links none of a key's
// owners (core's own tests) registers nothing for it, and the loader then takes any name there:
// the owner's factory, wherever it is linked, still refuses one it does not know.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace murmur {

// Registers `names` for the config key `key` (a dotted path, "algorithm.name"); a later
// registration for the same key adds to it. Returns true, so a registry file can write
//   [[maybe_unused]] const bool kRegistered = register_names("algorithm.name", {...});
bool register_names(std::string_view key, const std::vector<std::string_view>& names);

// The names registered for `key`, in registration order; empty if none.
std::vector<std::string> registered_names(std::string_view key);

}  // namespace murmur
