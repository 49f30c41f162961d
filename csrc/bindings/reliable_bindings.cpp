// Bindings for the ReliableRAG kernels: check buffers, allocate outputs, release the GIL,
// call the kernel. No math here; the kernel checks the values (alpha, credibility, offsets,
// chain_question, the length of a ragged `used`).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "bindings/buffers.hpp"
#include "bindings/kernel_call.hpp"
#include "kernels/runtime.hpp"
#include "kernels/triple_reliability.hpp"

namespace rrag::bindings {

namespace {

// `used`: None, or a bool array of `ndim` dimensions (checked); returns whether it is given.
bool check_used(const py::object& used, py::ssize_t ndim) {
  if (used.is_none()) return false;
  if (!py::isinstance<py::array>(used))
    throw py::type_error("used: expected a numpy bool array or None, got " +
                         std::string(py::str(py::type::of(used).attr("__name__"))));
  check_buffer<bool>(py::reinterpret_borrow<py::array>(used), "used", ndim);
  return true;
}

struct Outputs {
  py::array_t<float> scores;
  py::array_t<int64_t> indices;
};

// The (B, k) outputs, k and their size checked first.
Outputs allocate_outputs(int64_t n_chains, int64_t k) {
  check_triple_k(k);
  check_budget(bytes_for({n_chains, k}, sizeof(float) + sizeof(int64_t)), "k", "the (len(query_emb), k) outputs");
  // As in Python: with no chains the (0, k) outputs fit any budget, but their strides
  // (k * itemsize, computed by pybind11 in ssize_t) must not overflow.
  if (k > (int64_t(1) << 59))
    throw std::invalid_argument("k: must be <= 2**59 (the (len(query_emb), k) outputs are arrays), got " +
                                std::to_string(k));
  return {py::array_t<float>({n_chains, k}), py::array_t<int64_t>({n_chains, k})};
}

py::tuple triple_reliability_py(const py::array& query_emb, const py::array& triple_emb, const py::array& credibility,
                                const py::object& used, double alpha, int64_t k, bool check_finite) {
  int64_t d = -1;
  const int64_t n_b = check_matrix(query_emb, "query_emb", d), n_t = check_matrix(triple_emb, "triple_emb", d);
  check_vector<double>(credibility, "credibility", n_t);
  const bool* u = nullptr;
  if (check_used(used, 2)) {
    const auto used_arr = py::reinterpret_borrow<py::array>(used);
    if (used_arr.shape(0) != n_b || used_arr.shape(1) != n_t)
      throw std::invalid_argument("used: expected shape (" + std::to_string(n_b) + ", " + std::to_string(n_t) +
                                  ") (len(query_emb), len(triple_emb)), got (" + std::to_string(used_arr.shape(0)) +
                                  ", " + std::to_string(used_arr.shape(1)) + ")");
    u = data_of<bool>(used_arr);
  }
  Outputs out = allocate_outputs(n_b, k);
  float* s = out.scores.mutable_data();
  int64_t* idx = out.indices.mutable_data();
  run_without_gil([&] {
    triple_reliability(data_of<float>(query_emb), n_b, data_of<float>(triple_emb), n_t, d,
                       data_of<double>(credibility), u, alpha, k, s, idx, check_finite);
  });
  return py::make_tuple(out.scores, out.indices);
}

py::tuple triple_reliability_segmented_py(const py::array& query_emb, const py::array& triple_emb,
                                          const py::array& credibility, const py::array& triple_offsets,
                                          const py::array& chain_question, const py::object& used, double alpha,
                                          int64_t k, bool check_finite) {
  int64_t d = -1;
  const int64_t n_b = check_matrix(query_emb, "query_emb", d), n_t = check_matrix(triple_emb, "triple_emb", d);
  check_vector<double>(credibility, "credibility", n_t);
  const int64_t n_off = check_vec<int64_t>(triple_offsets, "triple_offsets");
  if (n_off < 1) throw std::invalid_argument("triple_offsets: expected length Q + 1 >= 1, got 0");
  check_vector<int64_t>(chain_question, "chain_question", n_b);
  const bool* u = nullptr;
  int64_t n_used = 0;
  if (check_used(used, 1)) {
    const auto used_arr = py::reinterpret_borrow<py::array>(used);
    u = data_of<bool>(used_arr);
    n_used = used_arr.shape(0);
  }
  Outputs out = allocate_outputs(n_b, k);
  float* s = out.scores.mutable_data();
  int64_t* idx = out.indices.mutable_data();
  run_without_gil([&] {
    triple_reliability_segmented(data_of<float>(query_emb), n_b, data_of<float>(triple_emb), n_t, d,
                                 data_of<double>(credibility), data_of<int64_t>(triple_offsets), n_off - 1,
                                 data_of<int64_t>(chain_question), u, n_used, alpha, k, s, idx,
                                 check_finite);
  });
  return py::make_tuple(out.scores, out.indices);
}

}  // namespace

void register_reliable(py::module_& m) {
  m.def("triple_reliability", &triple_reliability_py, py::arg("query_emb"), py::arg("triple_emb"),
        py::arg("credibility"), py::arg("used") = py::none(), py::arg("alpha") = 0.4, py::arg("k") = 20,
        py::arg("check_finite") = true,
        "ReliableRAG top-k by R = alpha cos(q, t) + (1 - alpha) c(t) / 10 over unused triples: (B, d), (T, d), "
        "(T,) float64, used (B, T) bool or None -> (scores (B, k) float32, indices (B, k) int64; -1 / -inf pad).");
  m.def("triple_reliability_segmented", &triple_reliability_segmented_py, py::arg("query_emb"),
        py::arg("triple_emb"), py::arg("credibility"), py::arg("triple_offsets"), py::arg("chain_question"),
        py::arg("used") = py::none(), py::arg("alpha") = 0.4, py::arg("k") = 20, py::arg("check_finite") = true,
        "triple_reliability with each chain scoring its question's triples: (B, d), (T, d), (T,) float64, "
        "(Q + 1,) int64, (B,) int64, ragged used or None -> (scores (B, k) float32, global indices (B, k) int64).");
}

}  // namespace rrag::bindings
