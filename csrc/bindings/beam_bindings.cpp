// Bindings for ReliableRAG's beam search: check buffers, release the GIL, call the kernel,
// hand its vectors to NumPy without a copy. No math here; the kernel checks the values.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <utility>

#include "bindings/buffers.hpp"
#include "bindings/kernel_call.hpp"
#include "kernels/beam_step.hpp"

namespace rrag::bindings {

namespace {

py::tuple beam_step_py(const py::array& parent_scores, const py::array& finished, const py::array& choice_probs,
                       const py::array& n_candidates, const py::array& chain_offsets, int64_t beams, double min_prob,
                       int64_t max_chains) {
  const int64_t n_chains = check_vec<double>(parent_scores, "parent_scores");
  check_vec<bool>(finished, "finished", n_chains);
  check_buffer<double>(choice_probs, "choice_probs", 2);
  if (choice_probs.shape(0) != n_chains)
    throw std::invalid_argument("choice_probs: expected " + std::to_string(n_chains) +
                                " rows (len(parent_scores)), got " + std::to_string(choice_probs.shape(0)));
  check_vec<int64_t>(n_candidates, "n_candidates", n_chains);
  const int64_t len = check_vec<int64_t>(chain_offsets, "chain_offsets");
  if (len < 1) throw std::invalid_argument("chain_offsets: expected length Q + 1 >= 1, got 0");
  BeamStepResult r;
  run_without_gil([&] {
    r = beam_step(data_of<double>(parent_scores), static_cast<const uint8_t*>(finished.data()),
                  data_of<double>(choice_probs), data_of<int64_t>(n_candidates), n_chains, choice_probs.shape(1),
                  data_of<int64_t>(chain_offsets), len - 1, beams, min_prob, max_chains);
  });
  return py::make_tuple(owned(std::move(r.parent)), owned(std::move(r.choice)), owned(std::move(r.score)),
                        owned(std::move(r.finished), py::dtype::of<bool>()), owned(std::move(r.offsets)));
}

}  // namespace

void register_beam(py::module_& m) {
  m.def("beam_step", &beam_step_py, py::arg("parent_scores"), py::arg("finished"), py::arg("choice_probs"),
        py::arg("n_candidates"), py::arg("chain_offsets"), py::arg("beams"), py::arg("min_prob"),
        py::arg("max_chains"),
        "One hop of ReliableRAG's beam search -> (parent (N,) int64, choice (N,) int64, score (N,) float64, "
        "finished (N,) bool, offsets (Q + 1,) int64).");
}

}  // namespace rrag::bindings
