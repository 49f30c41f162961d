// How a binding runs a kernel: GIL released, inside a CallScope (so that long kernels check
// for Ctrl-C; see kernels/parallel.hpp). The module registers the interrupt hook and the
// translation of rrag::Interrupted into the pending KeyboardInterrupt.
#pragma once

#include <pybind11/pybind11.h>

#include "kernels/parallel.hpp"

namespace rrag::bindings {

template <class F>
void run_without_gil(F&& kernel) {
  pybind11::gil_scoped_release release;
  CallScope scope;
  kernel();
}

}  // namespace rrag::bindings
