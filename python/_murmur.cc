// murmur._murmur: murmur/murmur.h for Python (pybind11). Buffers cross as (address, floats,
// device) triples that the package's Python side (murmur/__init__.py) takes from torch tensors
// or numpy arrays after checking their dtype, layout and device; this side trusts those checks
// and holds no Python object. Every call that may wait for other peers releases the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/murmur/murmur.h"

namespace py = pybind11;

namespace {

// (address, floats, device): device -1 is host memory, d >= 0 CUDA device d.
using RawBuffer = std::tuple<std::uintptr_t, std::size_t, int>;

murmur::Buffer buffer_of(const RawBuffer& raw) {
  const auto& [address, count, device] = raw;
  murmur::Buffer b;
  b.data = reinterpret_cast<float*>(address);
  b.count = count;
  b.memory = device < 0 ? murmur::Memory::kHost : murmur::Memory::kCuda;
  b.device = device < 0 ? 0 : device;
  return b;
}

double or_nan(const std::optional<double>& v) { return v ? *v : NAN; }

}  // namespace

PYBIND11_MODULE(_murmur, m) {
  m.doc() = "murmur's C++ API (murmur/murmur.h); use the murmur package, not this module";

  // The hierarchy of core/error.h, as Python exceptions of the usual kinds.
  static py::exception<murmur::Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<murmur::ConfigError> config_error(m, "ConfigError", error.ptr());
  static py::exception<murmur::TransportError> transport_error(m, "TransportError", error.ptr());
  static py::exception<murmur::PeerLost> peer_lost(m, "PeerLost", transport_error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const murmur::ConfigError& e) {
      config_error(e.what());
    } catch (const murmur::PeerLost& e) {
      peer_lost(e.what());
    } catch (const murmur::TransportError& e) {
      transport_error(e.what());
    } catch (const murmur::Error& e) {
      error(e.what());
    }
  });

  using murmur::Communicator;
  py::class_<Communicator>(m, "Communicator", py::dynamic_attr())
      .def(py::init([](const std::string& config_file, const std::string& config_yaml,
                       const std::vector<std::string>& overrides, const std::string& out,
                       bool handle_signals, bool size_threads, std::uintptr_t cuda_stream,
                       const std::string& log_name) {
             murmur::Options o;
             o.config_file = config_file;
             o.config_yaml = config_yaml;
             o.overrides = overrides;
             o.out = out;
             o.handle_signals = handle_signals;
             o.size_threads = size_threads;
             o.cuda_stream = reinterpret_cast<void*>(cuda_stream);
             o.log_name = log_name;
             py::gil_scoped_release release;  // meets the other peers
             return std::make_unique<Communicator>(o);
           }),
           py::arg("config_file") = "", py::arg("config_yaml") = "",
           py::arg("overrides") = std::vector<std::string>{}, py::arg("out") = "",
           py::arg("handle_signals") = true, py::arg("size_threads") = true, py::arg("cuda_stream") = 0,
           py::arg("log_name") = "")
      .def_property_readonly("rank", &Communicator::rank)
      .def_property_readonly("world_size", &Communicator::world_size)
      .def_property_readonly("local_rank", &Communicator::local_rank)
      .def_property_readonly("local_size", &Communicator::local_size)
      .def_property_readonly("compute_threads", &Communicator::compute_threads)
      .def_property_readonly("out", &Communicator::out)
      .def("config_json", &Communicator::config_json)
      .def("attach",
           [](Communicator& c, const std::vector<RawBuffer>& raw, const std::vector<std::string>& description) {
             std::vector<murmur::Buffer> buffers;
             for (const auto& r : raw) buffers.push_back(buffer_of(r));
             py::gil_scoped_release release;
             c.attach(buffers, description);
           },
           py::arg("buffers"), py::arg("description") = std::vector<std::string>{})
      .def("agree_start", &Communicator::agree_start, py::call_guard<py::gil_scoped_release>())
      .def("after_step",
           [](Communicator& c, std::int64_t step, std::optional<double> loss, std::int64_t samples) {
             py::gil_scoped_release release;
             c.after_step(step, or_nan(loss), samples);
           },
           py::arg("step"), py::arg("loss") = py::none(), py::arg("samples") = 0)
      .def("flush", &Communicator::flush, py::call_guard<py::gil_scoped_release>())
      .def("log_eval",
           [](Communicator& c, std::optional<double> accuracy, std::optional<double> loss,
              std::optional<double> epoch) { c.log_eval({or_nan(accuracy), or_nan(loss)}, or_nan(epoch)); },
           py::arg("accuracy") = py::none(), py::arg("loss") = py::none(), py::arg("epoch") = py::none())
      .def("average",
           [](Communicator& c) {
             murmur::Average a;
             {
               py::gil_scoped_release release;
               a = c.average();
             }
             py::dict d;
             d["consensus_distance"] = a.consensus_distance;
             d["ranks"] = a.ranks;
             d["evaluator"] = a.evaluator;
             return d;
           })
      .def("finish",
           [](Communicator& c, std::optional<double> accuracy, std::optional<double> loss) {
             py::gil_scoped_release release;
             c.finish({or_nan(accuracy), or_nan(loss)});
           },
           py::arg("accuracy") = py::none(), py::arg("loss") = py::none())
      .def("stats",
           [](const Communicator& c) {
             const murmur::Stats s = c.stats();
             py::dict d;
             d["step"] = s.step;
             d["bytes_sent"] = s.bytes_sent;
             d["bytes_received"] = s.bytes_received;
             d["compute_s"] = s.compute_s;
             d["comm_s"] = s.comm_s;
             d["wait_s"] = s.wait_s;
             return d;
           })
      .def("stop_requested", &Communicator::stop_requested)
      .def("stop_signal", &Communicator::stop_signal)
      .def("neighbor_average",
           [](Communicator& c, const RawBuffer& x) {
             py::gil_scoped_release release;
             c.neighbor_average(buffer_of(x));
           })
      .def("allreduce",
           [](Communicator& c, const RawBuffer& x, bool mean) {
             py::gil_scoped_release release;
             c.allreduce(buffer_of(x), mean);
           },
           py::arg("x"), py::arg("mean") = true)
      .def("broadcast",
           [](Communicator& c, const RawBuffer& x, int root) {
             py::gil_scoped_release release;
             c.broadcast(buffer_of(x), root);
           },
           py::arg("x"), py::arg("root") = 0)
      .def("barrier", &Communicator::barrier, py::call_guard<py::gil_scoped_release>())
      .def("neighbors", [](const Communicator& c, std::int64_t round) {
        const murmur::Neighbors n = c.neighbors(round);
        py::dict d;
        d["self_weight"] = n.self_weight;
        d["recv_from"] = n.recv_from;
        d["recv_weights"] = n.recv_weights;
        d["send_to"] = n.send_to;
        d["send_weights"] = n.send_weights;
        return d;
      });
}
