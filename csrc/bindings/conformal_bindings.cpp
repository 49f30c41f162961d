// Bindings for the conformal-factuality kernels: check buffers, release the GIL, call the
// kernel. No math here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "bindings/buffers.hpp"
#include "bindings/kernel_call.hpp"
#include "kernels/conformal_quantile.hpp"
#include "kernels/conformal_sweep.hpp"
#include "kernels/r_scores.hpp"
#include "kernels/runtime.hpp"

namespace rrag::bindings {

namespace {

// scores (C,) float64, labels_ok (C,) bool, offsets (n + 1,) int64 -> n
int64_t check_claims(const py::array& scores, const py::array& labels_ok, const py::array& offsets, int64_t& n_claims) {
  n_claims = check_vec<double>(scores, "scores");
  check_vec<bool>(labels_ok, "labels_ok", n_claims);
  const int64_t len = check_vec<int64_t>(offsets, "offsets");
  if (len < 1) throw std::invalid_argument("offsets: expected length n + 1 >= 1, got 0");
  return len - 1;
}

py::array_t<double> r_scores_py(const py::array& scores, const py::array& labels_ok, const py::array& offsets,
                                double a, double sentinel) {
  int64_t n_claims = 0;
  const int64_t n = check_claims(scores, labels_ok, offsets, n_claims);
  py::array_t<double> out(n);
  double* o = out.mutable_data();
  run_without_gil([&] {
    r_scores(data_of<double>(scores), data_of<bool>(labels_ok), n_claims, data_of<int64_t>(offsets), n, a, sentinel, o);
  });
  return out;
}

py::array_t<double> conformal_quantile_py(const py::array& r, const py::array& alphas, bool raise_if_too_few) {
  const int64_t n = check_vec<double>(r, "r");
  const int64_t n_alphas = check_vec<double>(alphas, "alpha");
  py::array_t<double> out(n_alphas);
  double* o = out.mutable_data();
  run_without_gil([&] {
    conformal_quantile(data_of<double>(r), n, data_of<double>(alphas), n_alphas, raise_if_too_few, o);
  });
  return out;
}

py::dict conformal_sweep_py(const py::array& scores, const py::array& labels_ok, const py::array& offsets,
                            const py::array& alphas, int64_t n_splits, double calib_fraction, uint64_t seed, double a,
                            double sentinel, const py::object& groups, int64_t n_groups) {
  int64_t n_claims = 0;
  const int64_t n = check_claims(scores, labels_ok, offsets, n_claims);
  const int64_t n_alphas = check_vec<double>(alphas, "alphas");
  if (n_splits < 0) throw std::invalid_argument("n_splits: must be >= 0, got " + std::to_string(n_splits));
  const int64_t* g = nullptr;
  py::array garr;
  if (!groups.is_none()) {
    if (!py::isinstance<py::array>(groups)) throw py::type_error("groups: expected an int64 numpy array or None");
    garr = py::reinterpret_borrow<py::array>(groups);
    check_vec<int64_t>(garr, "groups", n);
    g = data_of<int64_t>(garr);
    if (n_groups < 1) throw std::invalid_argument("n_groups: must be >= 1 with groups");
  } else {
    n_groups = 1;
  }
  // The outputs grow with n_splits (q_hat by alphas x groups as well): checked before allocating.
  check_budget(bytes_for({n_alphas, n_groups}, 8 * 4), "n_groups", "the per-group band tables");
  const uint64_t per_split = bytes_for({n_alphas, n_groups}, 8) + bytes_for({n_alphas}, 4 * 8) + bytes_for({n_groups}, 8);
  check_budget(bytes_for({n_splits}, per_split), "n_splits", "the per-split outputs");
  py::array_t<double> q_hat({n_splits, n_alphas, n_groups});
  py::array_t<double> fs({n_splits, n_alphas}), ret({n_splits, n_alphas}), ne({n_splits, n_alphas}),
      fsne({n_splits, n_alphas});
  py::array_t<int64_t> ncal({n_splits, n_groups});
  SweepOutput o{q_hat.mutable_data(), fs.mutable_data(), ret.mutable_data(),
                ne.mutable_data(),    fsne.mutable_data(), ncal.mutable_data()};
  run_without_gil([&] {
    conformal_sweep(data_of<double>(scores), data_of<bool>(labels_ok), n_claims, data_of<int64_t>(offsets), n,
                    data_of<double>(alphas), n_alphas, n_splits, calib_fraction, seed, a, sentinel, g, n_groups, o);
  });
  py::dict d;
  d["q_hat"] = q_hat;
  d["fully_supported"] = fs;
  d["retention"] = ret;
  d["non_empty"] = ne;
  d["supported_given_non_empty"] = fsne;
  d["n_calib"] = ncal;
  return d;
}

// Testing hook: the active ISA's split-key bit words for positions 0..count-1 (perm: None or
// (count,) int64), as (below, window) uint64 arrays of ceil(count / 64) words.
py::tuple split_key_bits_py(uint64_t base, const py::object& perm, int64_t count, uint64_t lo, uint64_t span) {
  if (count < 0) throw std::invalid_argument("count: must be >= 0");
  const int64_t* p = nullptr;
  py::array perm_arr;
  if (!perm.is_none()) {
    if (!py::isinstance<py::array>(perm)) throw py::type_error("perm: expected an int64 numpy array or None");
    perm_arr = py::reinterpret_borrow<py::array>(perm);
    check_vec<int64_t>(perm_arr, "perm", count);
    p = data_of<int64_t>(perm_arr);
  }
  const py::ssize_t words = count / 64 + (count % 64 != 0);
  check_budget(bytes_for({words}, 2 * sizeof(uint64_t)), "count", "the (below, window) bit words");
  py::array_t<uint64_t> below(words), window(words);
  primitives().split_key_bits(base, p, count, lo, span, below.mutable_data(), window.mutable_data());
  return py::make_tuple(below, window);
}

}  // namespace

void register_conformal(py::module_& m) {
  m.def("r_scores", &r_scores_py, py::arg("scores"), py::arg("labels_ok"), py::arg("offsets"), py::arg("a"),
        py::arg("sentinel"), "Conformal-factuality r-score of each response -> (n,) float64.");
  m.def("conformal_quantile", &conformal_quantile_py, py::arg("r"), py::arg("alphas"), py::arg("raise_if_too_few"),
        "k-th smallest r-score, k = ceil((n+1)(1-alpha)), per alpha -> (n_alphas,) float64 (+inf when k > n).");
  m.def("conformal_sweep", &conformal_sweep_py, py::arg("scores"), py::arg("labels_ok"), py::arg("offsets"),
        py::arg("alphas"), py::arg("n_splits"), py::arg("calib_fraction"), py::arg("seed"), py::arg("a"),
        py::arg("sentinel"), py::arg("groups") = py::none(), py::arg("n_groups") = 1,
        "All calibration/test splits x alphas -> dict(q_hat, fully_supported, retention, non_empty, "
        "supported_given_non_empty, n_calib).");
  m.def("_split_key_bits", &split_key_bits_py, py::arg("base"), py::arg("perm"), py::arg("count"), py::arg("lo"),
        py::arg("span"), "Testing hook: the active ISA's split-key bit words -> (below, window) uint64.");
  m.def("_set_quantile_bands", &set_quantile_bands, py::arg("on"),
        "Testing hook: False makes conformal_quantile select over all n (results are identical).");
  m.def("_set_sweep_tuning", &set_sweep_tuning, py::arg("window_sigmas"), py::arg("band_sigmas"),
        py::arg("stable_classes"),
        "Testing hook: widths of conformal_sweep's shortcuts (defaults 8, 8, True); results are identical.");
}

}  // namespace rrag::bindings
