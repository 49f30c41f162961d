// rrag_kernels._core: runtime settings and the registration of each kernel family.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "kernels/runtime.hpp"

namespace py = pybind11;

namespace rrag::bindings {
void register_cosine(py::module_& m);
void register_graph(py::module_& m);
void register_nli(py::module_& m);
void register_conformal(py::module_& m);
}

PYBIND11_MODULE(_core, m) {
  m.doc() = "rrag_kernels compiled kernels (C++/OpenMP). Use rrag_kernels.ops, not this module.";
  m.attr("__version__") = RRAG_VERSION;
  m.def("get_num_threads", &rrag::get_num_threads, "Threads the kernels use.");
  m.def("set_num_threads", &rrag::set_num_threads, py::arg("n"), "Set the threads the kernels use (>= 1).");
  m.def("simd_level", &rrag::simd_level, "Active SIMD primitives: scalar, avx2 or avx512.");
  m.def("available_simd_levels", &rrag::available_simd_levels, "SIMD levels this CPU supports.");
  m.def("set_simd_level", &rrag::set_simd_level, py::arg("name"), "Force a SIMD level (for tests and benchmarks).");
  m.def("compiler", &rrag::compiler_id, "Compiler that built the extension.");
  m.def("openmp_version", &rrag::openmp_version, "The _OPENMP date macro of the build.");
  m.def("native_build", &rrag::native_build, "Whether the build used -march=native (RRAG_NATIVE=ON).");
  rrag::bindings::register_cosine(m);
  rrag::bindings::register_graph(m);
  rrag::bindings::register_nli(m);
  rrag::bindings::register_conformal(m);
}
