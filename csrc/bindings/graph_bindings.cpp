// Bindings for the MIRAGE claim-graph kernels: check buffers, release the GIL, call the
// kernel, hand its vectors to NumPy without a copy. No math here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string_view>
#include <utility>
#include <vector>

#include "bindings/buffers.hpp"
#include "bindings/kernel_call.hpp"
#include "kernels/gate_stats.hpp"
#include "kernels/greedy_prune.hpp"
#include "kernels/nli_graph.hpp"
#include "kernels/select_pairs.hpp"

namespace rrag::bindings {

namespace {

void check_probs(const py::array& a, const char* arg, int64_t rows) {
  check_buffer<double>(a, arg, 2);
  if (a.shape(0) != rows || a.shape(1) != 3)
    throw std::invalid_argument(std::string(arg) + ": expected shape (" + std::to_string(rows) + ", 3), got (" +
                                std::to_string(a.shape(0)) + ", " + std::to_string(a.shape(1)) + ")");
}

py::tuple claim_token_ids_py(const py::list& texts) {
  // Hold a reference to every string so that the UTF-8 views stay valid without the GIL.
  std::vector<py::object> keep_alive;
  std::vector<std::string_view> views;
  keep_alive.reserve(texts.size());
  views.reserve(texts.size());
  for (size_t k = 0; k < texts.size(); ++k) {
    py::object item = texts[k];
    if (!PyUnicode_Check(item.ptr()))
      throw py::type_error("texts: expected a list of str, item " + std::to_string(k) + " is " +
                           std::string(py::str(py::type::of(item).attr("__name__"))));
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(item.ptr(), &size);
    if (!data) {
      // A lone surrogate has no UTF-8 form: encode it as "?", which separates tokens just
      // as the surrogate does for the regex.
      PyErr_Clear();
      py::object encoded = py::reinterpret_steal<py::object>(PyUnicode_AsEncodedString(item.ptr(), "utf-8", "replace"));
      if (!encoded) throw py::error_already_set();
      data = PyBytes_AS_STRING(encoded.ptr());
      size = PyBytes_GET_SIZE(encoded.ptr());
      item = std::move(encoded);
    }
    views.emplace_back(data, static_cast<size_t>(size));
    keep_alive.push_back(std::move(item));
  }
  std::vector<int64_t> ids, offsets;
  run_without_gil([&] {
    claim_token_ids(views, ids, offsets);
  });
  return py::make_tuple(owned(std::move(ids)), owned(std::move(offsets)));
}

py::tuple select_pairs_py(const py::array& token_ids, const py::array& token_offsets, const py::array& source_ids,
                          double tau, int64_t max_pairs) {
  const int64_t n_tokens = check_vec<int64_t>(token_ids, "token_ids");
  const int64_t n_claims = check_vec<int64_t>(source_ids, "source_ids");
  check_vec<int64_t>(token_offsets, "token_offsets", n_claims + 1);
  PairList pairs;
  run_without_gil([&] {
    pairs = select_pairs(data_of<int64_t>(token_ids), n_tokens, data_of<int64_t>(token_offsets), n_claims,
                         data_of<int64_t>(source_ids), tau, max_pairs);
  });
  return py::make_tuple(owned(std::move(pairs.i)), owned(std::move(pairs.j)), owned(std::move(pairs.overlap)));
}

py::tuple nli_graph_py(const py::array& i, const py::array& j, const py::array& probs_fwd, const py::array& probs_bwd,
                       int64_t n_claims, int entail_col, int contr_col, bool mean) {
  const int64_t n_pairs = check_vec<int64_t>(i, "i");
  check_vec<int64_t>(j, "j", n_pairs);
  check_probs(probs_fwd, "probs_fwd", n_pairs);
  check_probs(probs_bwd, "probs_bwd", n_pairs);
  NliGraph g;
  run_without_gil([&] {
    g = nli_graph(data_of<int64_t>(i), data_of<int64_t>(j), n_pairs, data_of<double>(probs_fwd),
                  data_of<double>(probs_bwd), n_claims, entail_col, contr_col, mean);
  });
  return py::make_tuple(owned(std::move(g.w_supp)), owned(std::move(g.w_contr)), owned(std::move(g.kind)),
                        owned(std::move(g.support_count)), owned(std::move(g.contradiction_count)),
                        owned(std::move(g.indptr)), owned(std::move(g.neighbors)), owned(std::move(g.edge_ids)));
}

py::tuple greedy_prune_py(const py::array& node_scores, const py::array& edge_i, const py::array& edge_j,
                          const py::array& edge_weight, const py::object& self_penalty) {
  const int64_t n = check_vec<double>(node_scores, "node_scores");
  const int64_t n_edges = check_vec<int64_t>(edge_i, "edge_i");
  check_vec<int64_t>(edge_j, "edge_j", n_edges);
  check_vec<double>(edge_weight, "edge_weight", n_edges);
  const double* pen = nullptr;
  py::array pen_arr;
  if (!self_penalty.is_none()) {
    if (!py::isinstance<py::array>(self_penalty))
      throw py::type_error("self_penalty: expected a float64 numpy array or None");
    pen_arr = py::reinterpret_borrow<py::array>(self_penalty);
    check_vec<double>(pen_arr, "self_penalty", n);
    pen = data_of<double>(pen_arr);
  }
  PruneResult r;
  run_without_gil([&] {
    r = greedy_prune(data_of<double>(node_scores), n, data_of<int64_t>(edge_i), data_of<int64_t>(edge_j),
                     data_of<double>(edge_weight), n_edges, pen);
  });
  return py::make_tuple(owned(std::move(r.keep), py::dtype::of<bool>()), owned(std::move(r.removal_order)), r.F);
}

py::dict gate_stats_py(const py::array& keep, const py::array& edge_i, const py::array& edge_j, const py::array& kind,
                       const py::array& domain_ids, double eps, bool count_unknown) {
  const int64_t n = check_vec<bool>(keep, "keep");
  const int64_t n_edges = check_vec<int64_t>(edge_i, "edge_i");
  check_vec<int64_t>(edge_j, "edge_j", n_edges);
  check_vec<int8_t>(kind, "kind", n_edges);
  check_vec<int64_t>(domain_ids, "domain_ids", n);
  GateStats g;
  run_without_gil([&] {
    g = gate_stats(static_cast<const uint8_t*>(keep.data()), n, data_of<int64_t>(edge_i), data_of<int64_t>(edge_j),
                   static_cast<const int8_t*>(kind.data()), n_edges, data_of<int64_t>(domain_ids), eps,
                   count_unknown);
  });
  py::dict out;
  out["n_kept"] = g.n_kept;
  out["n_support"] = g.n_support;
  out["n_contradiction"] = g.n_contradiction;
  out["r_contr"] = g.r_contr;
  out["n_domains"] = g.n_domains;
  return out;
}

}  // namespace

void register_graph(py::module_& m) {
  m.def("claim_token_ids", &claim_token_ids_py, py::arg("texts"),
        "Word tokens [a-z0-9]+(?:'[a-z]+)? of each (ASCII-lower-cased) text as ids by first appearance -> "
        "(token_ids (T,) int64, token_offsets (N + 1,) int64).");
  m.def("select_pairs", &select_pairs_py, py::arg("token_ids"), py::arg("token_offsets"), py::arg("source_ids"),
        py::arg("tau"), py::arg("max_pairs"),
        "Cross-source claim pairs with token-set overlap >= tau -> (i (P,), j (P,), overlap (P,) float64); "
        "max_pairs = -1: no cap.");
  m.def("nli_graph", &nli_graph_py, py::arg("i"), py::arg("j"), py::arg("probs_fwd"), py::arg("probs_bwd"),
        py::arg("n_claims"), py::arg("entail_col"), py::arg("contr_col"), py::arg("mean"),
        "Claim graph from NLI probabilities -> (w_supp, w_contr, kind, support_count, contradiction_count, "
        "indptr, neighbors, edge_ids).");
  m.def("greedy_prune", &greedy_prune_py, py::arg("node_scores"), py::arg("edge_i"), py::arg("edge_j"),
        py::arg("edge_weight"), py::arg("self_penalty") = py::none(),
        "Exact greedy pruning of F(S) -> (keep (N,) bool, removal_order (R,) int64, F float).");
  m.def("gate_stats", &gate_stats_py, py::arg("keep"), py::arg("edge_i"), py::arg("edge_j"), py::arg("kind"),
        py::arg("domain_ids"), py::arg("eps"), py::arg("count_unknown"),
        "Gate statistics of a kept claim set -> dict(n_kept, n_support, n_contradiction, r_contr, n_domains).");
}

}  // namespace rrag::bindings
