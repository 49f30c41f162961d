// Bindings for the cosine kernel family: check buffers, allocate outputs, release the GIL,
// call the kernel. No math here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "bindings/buffers.hpp"
#include "bindings/kernel_call.hpp"
#include "kernels/runtime.hpp"
#include "kernels/claim_relevance.hpp"
#include "kernels/cosine_matrix.hpp"
#include "kernels/segmented_cosine.hpp"
#include "kernels/topk_cosine.hpp"

namespace rrag::bindings {

namespace {

py::array_t<float> cosine_matrix_py(const py::array& a, const py::array& b, bool check_finite) {
  int64_t d = -1;
  const int64_t n = check_matrix(a, "a", d), m = check_matrix(b, "b", d);
  check_budget(bytes_for({n, m}, sizeof(float)), "b", "the (len(a), len(b)) float32 output");
  py::array_t<float> out({n, m});
  float* o = out.mutable_data();
  run_without_gil([&] {
    cosine_matrix(data_of<float>(a), n, data_of<float>(b), m, d, o, check_finite);
  });
  return out;
}

py::array_t<float> segmented_cosine_py(const py::array& queries, const py::array& docs,
                                       const py::array& doc_offsets, bool check_finite) {
  int64_t d = -1;
  const int64_t n_q = check_matrix(queries, "queries", d), n_d = check_matrix(docs, "docs", d);
  check_vector<int64_t>(doc_offsets, "doc_offsets", n_q + 1);
  py::array_t<float> out(n_d);
  float* o = out.mutable_data();
  run_without_gil([&] {
    segmented_cosine(data_of<float>(queries), n_q, data_of<float>(docs), n_d, d,
                     data_of<int64_t>(doc_offsets), o, check_finite);
  });
  return out;
}

py::array_t<float> claim_relevance_py(const py::array& query_emb, const py::array& doc_emb,
                                      const py::array& doc_offsets, const py::array& claim_emb,
                                      const py::array& claim_offsets, const py::object& query_doc_sim,
                                      bool clip, bool check_finite) {
  int64_t d = -1;
  const int64_t n_q = check_matrix(query_emb, "query_emb", d);
  const int64_t n_d = check_matrix(doc_emb, "doc_emb", d);
  const int64_t n_c = check_matrix(claim_emb, "claim_emb", d);
  check_vector<int64_t>(doc_offsets, "doc_offsets", n_q + 1);
  check_vector<int64_t>(claim_offsets, "claim_offsets", n_q + 1);
  const float* sim = nullptr;
  py::array sim_arr;
  if (!query_doc_sim.is_none()) {
    if (!py::isinstance<py::array>(query_doc_sim))
      throw py::type_error("query_doc_sim: expected a float32 numpy array or None");
    sim_arr = py::reinterpret_borrow<py::array>(query_doc_sim);
    check_vector<float>(sim_arr, "query_doc_sim", n_d);
    sim = data_of<float>(sim_arr);
  }
  py::array_t<float> out(n_c);
  float* o = out.mutable_data();
  run_without_gil([&] {
    claim_relevance(data_of<float>(query_emb), n_q, data_of<float>(doc_emb), n_d,
                    data_of<int64_t>(doc_offsets), data_of<float>(claim_emb), n_c,
                    data_of<int64_t>(claim_offsets), d, sim, clip, o, check_finite);
  });
  return out;
}

py::tuple topk_cosine_py(const py::array& queries, const py::array& corpus, int64_t k, bool check_finite) {
  int64_t d = -1;
  const int64_t n_q = check_matrix(queries, "queries", d), n_c = check_matrix(corpus, "corpus", d);
  if (k < 1 || k > n_c)
    throw std::invalid_argument("k: must satisfy 1 <= k <= len(corpus) = " + std::to_string(n_c) +
                                ", got " + std::to_string(k));
  check_budget(bytes_for({n_q, k}, sizeof(float) + sizeof(int64_t)), "k", "the (len(queries), k) outputs");
  py::array_t<float> scores({n_q, k});
  py::array_t<int64_t> indices({n_q, k});
  float* s = scores.mutable_data();
  int64_t* idx = indices.mutable_data();
  run_without_gil([&] {
    topk_cosine(data_of<float>(queries), n_q, data_of<float>(corpus), n_c, d, k, s, idx, check_finite);
  });
  return py::make_tuple(scores, indices);
}

}  // namespace

void register_cosine(py::module_& m) {
  m.def("cosine_matrix", &cosine_matrix_py, py::arg("a"), py::arg("b"), py::arg("check_finite") = true,
        "All-pairs cosine: (n, d), (m, d) float32 -> (n, m) float32.");
  m.def("segmented_cosine", &segmented_cosine_py, py::arg("queries"), py::arg("docs"),
        py::arg("doc_offsets"), py::arg("check_finite") = true,
        "Each doc's cosine with its own query: (Q, d), (D, d), (Q + 1,) int64 -> (D,) float32.");
  m.def("claim_relevance", &claim_relevance_py, py::arg("query_emb"), py::arg("doc_emb"),
        py::arg("doc_offsets"), py::arg("claim_emb"), py::arg("claim_offsets"),
        py::arg("query_doc_sim") = py::none(), py::arg("clip") = true, py::arg("check_finite") = true,
        "Conformal-RAG claim score R(c) = max_d sim(x, d) * cos(c, d) -> (C,) float32.");
  m.def("topk_cosine", &topk_cosine_py, py::arg("queries"), py::arg("corpus"), py::arg("k"),
        py::arg("check_finite") = true,
        "Fused top-k cosine: (Q, d), (N, d) -> (scores (Q, k) float32, indices (Q, k) int64).");
}

}  // namespace rrag::bindings
