// The Python interpreter that the numpy and torch cross-checks run, and what it can import.
// It is $MURMUR_TEST_PYTHON where set (point it at an interpreter without numpy to see those
// tests skip), else Debian's /usr/bin/python3, where Debian's numpy and torch live. Header only,
// no state; reads the environment on each call.
#pragma once

#include <cstdlib>
#include <string>

// Not murmur::testing: a test that says `using namespace murmur; using namespace murmur::topology;`
// and calls `testing::have_numpy()` would find two `testing` namespaces.
namespace murmur::test_python {

// The interpreter's path. Callers put it in shell command lines: it must hold no quote or space.
inline std::string interpreter() {
  const char* env = std::getenv("MURMUR_TEST_PYTHON");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/python3";
}

// Returns true iff interpreter() runs and can `import module`.
inline bool can_import(const std::string& module) {
  const std::string command = "'" + interpreter() + "' -c 'import " + module + "' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

}  // namespace murmur::test_python
