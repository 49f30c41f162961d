// rrag_kernels._core: runtime settings and the registration of each kernel family.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <exception>

#include "kernels/parallel.hpp"
#include "kernels/runtime.hpp"

namespace py = pybind11;

namespace {

unsigned long g_main_thread = 0;

// Runs Python's signal handlers (on the main thread only: they run nowhere else); true when
// one raised, e.g. KeyboardInterrupt for Ctrl-C. Its exception stays set for the translator.
bool python_signal_raised() {
  if (PyThread_get_thread_ident() != g_main_thread) return false;
  PyGILState_STATE state = PyGILState_Ensure();
  const bool raised = PyErr_CheckSignals() != 0;
  PyGILState_Release(state);
  return raised;
}

}  // namespace

namespace rrag::bindings {
void register_cosine(py::module_& m);
void register_graph(py::module_& m);
void register_nli(py::module_& m);
void register_conformal(py::module_& m);
void register_reliable(py::module_& m);
void register_beam(py::module_& m);
}

PYBIND11_MODULE(_core, m) {
  m.doc() = "rrag_kernels compiled kernels (C++, own thread pool). Use rrag_kernels.ops, not this module.";
  m.attr("__version__") = RRAG_VERSION;
  g_main_thread = static_cast<unsigned long>(
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long long>());
  rrag::set_interrupt_hook(&python_signal_raised);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const rrag::Interrupted&) {
      if (!PyErr_Occurred()) PyErr_SetNone(PyExc_KeyboardInterrupt);
    }
  });
  m.def("get_num_threads", &rrag::get_num_threads, "Threads the kernels use.");
  m.def("set_num_threads", &rrag::set_num_threads, py::arg("n"), "Set the threads the kernels use (1 .. max_threads()).");
  m.def("max_threads", &rrag::max_threads, "The largest thread count set_num_threads accepts.");
  m.def("memory_budget", &rrag::memory_budget, "Bytes one kernel call may allocate for outputs and scratch.");
  m.def("set_memory_budget", &rrag::set_memory_budget, py::arg("nbytes"), "Set the memory budget (bytes >= 0).");
  m.def("_pool_size", &rrag::pool_size, "Worker threads started so far (testing).");
  m.def("_set_min_work_scale", &rrag::set_min_work_scale, py::arg("scale"),
        "Testing hook: scale the work below which kernels stay on the calling thread (0: never).");
  m.def("simd_level", &rrag::simd_level, "Active SIMD primitives: scalar, avx2 or avx512.");
  m.def("available_simd_levels", &rrag::available_simd_levels, "SIMD levels this CPU supports.");
  m.def("set_simd_level", &rrag::set_simd_level, py::arg("name"), "Force a SIMD level (for tests and benchmarks).");
  m.def("compiler", &rrag::compiler_id, "Compiler that built the extension.");
  m.def("native_build", &rrag::native_build, "Whether the build used -march=native (RRAG_NATIVE=ON).");
  rrag::bindings::register_cosine(m);
  rrag::bindings::register_graph(m);
  rrag::bindings::register_nli(m);
  rrag::bindings::register_conformal(m);
  rrag::bindings::register_reliable(m);
  rrag::bindings::register_beam(m);
}
