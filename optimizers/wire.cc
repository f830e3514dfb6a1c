#include "optimizers/wire.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/names.h"
#include "transport/factory.h"

namespace murmur::optimizers {

namespace {
constexpr std::string_view kFormats[] = {"fp32", "fp16", "bf16"};
constexpr std::string_view kRoundings[] = {"nearest", "stochastic"};
[[maybe_unused]] const bool kRegistered =
    register_names("algorithm.wire.format", {std::begin(kFormats), std::end(kFormats)}) &&
    register_names("algorithm.wire.rounding", {std::begin(kRoundings), std::end(kRoundings)});
// Those that average by ExactAverage (the ring) or by dpsgd's plain exchange.
constexpr std::string_view kTakers[] = {"allreduce", "local_sgd", "diloco", "dpsgd"};
}  // namespace

std::optional<HalfFormat> half_wire(const WireConfig& wire) {
  if (wire.format == "fp16") return HalfFormat::kFp16;
  if (wire.format == "bf16") return HalfFormat::kBf16;
  return std::nullopt;
}

void check_wire(const AlgorithmConfig& a) {
  if (!half_wire(a.wire)) return;
  const std::string_view name = a.name;
  auto refuse = [&](std::string_view why) {
    throw ConfigError(fmt::format("algorithm.wire.format: {} with {}: {}", a.wire.format, name, why));
  };
  if (std::find(std::begin(kTakers), std::end(kTakers), name) == std::end(kTakers)) {
    refuse("the 16-bit wire is for allreduce, local_sgd, diloco and dpsgd (choco compresses "
           "with algorithm.compressor.name: fp16 or bf16)");
  }
  if (a.hierarchical) refuse("not with algorithm.hierarchical");
  if (a.sparsify.name != SparsifyConfig{}.name) {
    refuse("not with algorithm.sparsify (DGC sends its own sparse pairs)");
  }
  if (name == "dpsgd" && a.overlap) refuse("not with algorithm.overlap");
  if (name == "dpsgd" && a.max_staleness > 0) refuse("not with algorithm.max_staleness");
}

void check_wire_device(const WireConfig& wire, bool host_memory) {
  if (half_wire(wire) && !host_memory) {
    throw ConfigError(fmt::format("algorithm.wire.format: {} runs on host memory (device: cpu) "
                                  "for now, not on a GPU peer", wire.format));
  }
}

std::unique_ptr<transport::HalfRingAllreduce> make_half_allreduce(
    const WireConfig& wire, membership::Neighborhood& hood, bool host_memory,
    const TransportConfig& transport, std::uint64_t seed) {
  const std::optional<HalfFormat> format = half_wire(wire);
  if (!format) return nullptr;
  check_wire_device(wire, host_memory);
  if (hood.live()) {
    throw ConfigError(fmt::format("algorithm.wire.format: {} with an exact average needs "
                                  "run.on_peer_failure: stop (its ring is the whole world's)",
                                  wire.format));
  }
  return std::make_unique<transport::HalfRingAllreduce>(
      hood.transport(), transport::collective_options(transport), *format,
      wire.rounding == "stochastic", seed);
}

}  // namespace murmur::optimizers
