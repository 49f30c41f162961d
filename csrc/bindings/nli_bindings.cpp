// Bindings for the LexicalNLI kernels: check buffers, release the GIL, call the kernel,
// hand its vectors to NumPy without a copy. No math here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <utility>
#include <vector>

#include "bindings/buffers.hpp"
#include "bindings/kernel_call.hpp"
#include "kernels/lexical_align.hpp"

namespace rrag::bindings {

namespace {

// A vector handed to NumPy with the given shape: the array owns it through a capsule.
template <class T>
py::array owned_shaped(std::vector<T>&& v, std::vector<py::ssize_t> shape) {
  auto* heap = new std::vector<T>(std::move(v));
  py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t stride = sizeof(T);
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return py::array(py::dtype::of<T>(), shape, strides, heap->data(), owner);
}

py::tuple lexical_opcodes_py(const py::array& tokens_a, const py::array& offsets_a, const py::array& tokens_b,
                             const py::array& offsets_b, bool trim_affixes) {
  check_buffer<int64_t>(tokens_a, "tokens_a", 1);
  check_buffer<int64_t>(tokens_b, "tokens_b", 1);
  check_buffer<int64_t>(offsets_a, "offsets_a", 1);
  if (offsets_a.shape(0) < 1) throw std::invalid_argument("offsets_a: expected length n_pairs + 1 >= 1, got 0");
  const int64_t n_pairs = offsets_a.shape(0) - 1;
  check_vector<int64_t>(offsets_b, "offsets_b", n_pairs + 1);
  LexicalOpcodes r;
  run_without_gil([&] {
    r = lexical_opcodes(data_of<int64_t>(tokens_a), tokens_a.shape(0), data_of<int64_t>(offsets_a),
                        data_of<int64_t>(tokens_b), tokens_b.shape(0), data_of<int64_t>(offsets_b), n_pairs,
                        trim_affixes);
  });
  const auto k = static_cast<py::ssize_t>(r.ops.size() / 5);
  return py::make_tuple(owned_shaped(std::move(r.op_offsets), {n_pairs + 1}), owned_shaped(std::move(r.ops), {k, 5}));
}

}  // namespace

void register_nli(py::module_& m) {
  m.def("lexical_opcodes", &lexical_opcodes_py, py::arg("tokens_a"), py::arg("offsets_a"), py::arg("tokens_b"),
        py::arg("offsets_b"), py::arg("trim_affixes") = true,
        "difflib opcodes (autojunk=False) of each pair of token-id sequences -> (op_offsets (n + 1,) int64, "
        "ops (K, 5) int32 rows [tag, i1, i2, j1, j2], tag 0 equal / 1 replace / 2 delete / 3 insert). "
        "trim_affixes: match the common prefix and suffix first (LexicalNLI's _opcodes).");
}

}  // namespace rrag::bindings
