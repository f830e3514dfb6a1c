// Atomic whole-file writes and reads: content, no leftovers, errors that name the path.
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.h"
#include "core/files.h"

namespace fs = std::filesystem;

namespace {

// A fresh directory, removed with everything in it at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "murmur_files_test_XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
  std::size_t entries() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(path), fs::directory_iterator()));
  }
};

}  // namespace

TEST_CASE("atomic_write_file writes, replaces and leaves no temp files", "[files]") {
  TempDir dir;
  const fs::path file = dir.path / "a.bin";
  murmur::atomic_write_file(file, std::string_view("first version"));
  CHECK(murmur::read_text_file(file) == "first version");
  murmur::atomic_write_file(file, std::string_view("second"));
  CHECK(murmur::read_text_file(file) == "second");
  murmur::atomic_write_file(file, std::string_view(""));
  CHECK(murmur::read_file(file).empty());
  CHECK(dir.entries() == 1);

  std::vector<std::byte> big(3'000'001);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::byte>(i * 31 % 251);
  murmur::atomic_write_file(file, big);
  CHECK(murmur::read_file(file) == big);
}

TEST_CASE("AtomicFileWriter streams, and an abandoned writer changes nothing", "[files]") {
  TempDir dir;
  const fs::path file = dir.path / "stream.txt";
  {
    murmur::AtomicFileWriter w(file);
    w.write(std::string_view("hello, "));
    w.write(std::string_view("world"));
    CHECK_FALSE(fs::exists(file));  // invisible until commit
    w.commit();
    CHECK_THROWS_AS(w.write(std::string_view("late")), murmur::IoError);
  }
  CHECK(murmur::read_text_file(file) == "hello, world");
  {
    murmur::AtomicFileWriter w(file);
    w.write(std::string_view("half of a new vers"));
  }  // destroyed without commit, as when an exception unwinds
  CHECK(murmur::read_text_file(file) == "hello, world");
  CHECK(dir.entries() == 1);
}

TEST_CASE("concurrent writers of one file each land whole", "[files]") {
  TempDir dir;
  const fs::path file = dir.path / "shared";
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::string content(10000, static_cast<char>('a' + t));
      for (int i = 0; i < 5; ++i) murmur::atomic_write_file(file, std::string_view(content));
    });
  }
  for (auto& th : threads) th.join();
  const std::string last = murmur::read_text_file(file);
  REQUIRE(last.size() == 10000);
  CHECK(last == std::string(10000, last[0]));
  CHECK(dir.entries() == 1);
}

TEST_CASE("file errors are IoError naming the path and the reason", "[files]") {
  TempDir dir;
  const fs::path missing = dir.path / "nope.bin";
  CHECK_THROWS_AS(murmur::read_file(missing), murmur::IoError);
  CHECK_THROWS_WITH(murmur::read_file(missing),
                    Catch::Contains(missing.string()) && Catch::Contains("No such file or directory"));
  const fs::path no_dir = dir.path / "no_such_dir" / "x.bin";
  CHECK_THROWS_WITH(murmur::atomic_write_file(no_dir, std::string_view("x")),
                    Catch::Contains("no_such_dir") && Catch::Contains("No such file or directory"));
}
