// The one tag layout (transport/tag.h): fields round-trip, stay apart, and fit every backend's
// width for worlds up to 4096 ranks; a world too large for its backend is refused at once.
#include <catch2/catch.hpp>

#include <bit>
#include <set>

#include "core/error.h"
#include "transport/tag.h"

using namespace murmur;
using namespace murmur::transport;

namespace {

// The user bits each backend leaves for a world of n ranks (ucx: the source rank in the top bits;
// ofi: the rank and a 2-bit wire kind), as their Transport::tag_bits() computes them.
int rank_bits(int n) { return std::max(1, static_cast<int>(std::bit_width(static_cast<unsigned>(n - 1)))); }
int ucx_bits(int n) { return 64 - rank_bits(n); }
int ofi_bits(int n) { return 64 - rank_bits(n) - 2; }

}  // namespace

TEST_CASE("tag fields round-trip and wrap where they should", "[tag]") {
  const TagLayout layout(4, 64, "tcp");
  const Tag t = layout.make(purpose::kFirstAlgorithm + 2, 123456, 5, 77, 9);
  const TagFields f = layout.fields(t);
  CHECK(f.purpose == purpose::kFirstAlgorithm + 2);
  CHECK(f.epoch == 9);
  CHECK(f.round == 123456);
  CHECK(f.step == 5);
  CHECK(f.chunk == 77);
  // Rounds wrap after 2^20, epochs after 16: a tag repeats only long after its use.
  CHECK(layout.make(3, (std::int64_t{1} << kRoundBits) + 7) == layout.make(3, 7));
  CHECK(layout.make(3, 7, 0, 0, 16 + 2) == layout.make(3, 7, 0, 0, 2));
  CHECK(layout.describe(t).find("round 123456") != std::string::npos);
}

TEST_CASE("with() fills the step and chunk of a base tag only", "[tag]") {
  const TagLayout layout(8, 64);
  const Tag base = layout.make(purpose::kFinalAverage, 4);
  CHECK(layout.is_base(base));
  const Tag t = layout.with(base, 13, 2);
  CHECK(layout.fields(t).step == 13);
  CHECK(layout.fields(t).chunk == 2);
  CHECK_FALSE(layout.is_base(t));
  CHECK_THROWS_AS(layout.with(t, 1, 1), Error);  // its fields are taken
  CHECK_THROWS_AS(layout.with(base, layout.max_steps(), 0), Error);
  CHECK_THROWS_AS(layout.with(base, 0, layout.max_chunks()), Error);
  CHECK_THROWS_AS(layout.make(0, 1), Error);                 // purpose 0 is no purpose
  CHECK_THROWS_AS(layout.make(purpose::kCount, 1), Error);
}

TEST_CASE("every world up to 4096 ranks fits every backend, fields apart", "[tag]") {
  for (int n : {1, 2, 3, 4, 16, 64, 65, 256, 1000, 1024, 1025, 4096}) {
    for (int bits : {64, ucx_bits(n), ofi_bits(n)}) {
      CAPTURE(n, bits);
      const TagLayout layout(n, bits);
      // The ring's last step and the layout's last chunk still fit below the backend's width.
      CHECK(layout.max_steps() >= static_cast<std::uint64_t>(2 * (n - 1)));
      CHECK(layout.chunk_bits() >= kMinChunkBits);
      const Tag biggest = layout.make(purpose::kCount - 1, (1 << kRoundBits) - 1,
                                      layout.max_steps() - 1, layout.max_chunks() - 1, 15);
      CHECK((bits == 64 || biggest < (Tag{1} << bits)));
      // Changing any one field changes the tag, and no field spills into another.
      const unsigned p = purpose::kFirstAlgorithm;
      const std::int64_t r = 1000;
      const std::uint64_t s = layout.max_steps() - 1, c = layout.max_chunks() - 1;
      std::set<Tag> tags{layout.make(p, r, s, c, 1),     layout.make(p + 1, r, s, c, 1),
                         layout.make(p, r + 1, s, c, 1), layout.make(p, r, s - 1, c, 1),
                         layout.make(p, r, s, c - 1, 1), layout.make(p, r, s, c, 2)};
      CHECK(tags.size() == 6);
      const TagFields f = layout.fields(layout.make(p, r, s, c, 1));
      CHECK((f.purpose == p && f.round == r && f.step == s && f.chunk == c && f.epoch == 1));
    }
  }
}

TEST_CASE("a world too large for the backend's tag width is one clear error", "[tag]") {
  // 40 bits: 30 for purpose, epoch and round leaves too little for 2^20 ranks' steps.
  try {
    TagLayout(1 << 20, 40, "ofi");
    FAIL("no error");
  } catch (const TransportError& e) {
    const std::string what = e.what();
    CHECK(what.find("ofi") != std::string::npos);
    CHECK(what.find("1048576 ranks") != std::string::npos);
  }
  CHECK_THROWS_AS(TagLayout(0, 64), TransportError);
}
