// Buffer checks for the bindings: the Python layer already made every array contiguous and
// of the right dtype; these re-check it so that a direct _core call can never read out of
// bounds. Failures name the argument (ValueError / TypeError on the Python side).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rrag::bindings {

namespace py = pybind11;

// What a buffer of T must hold: numpy kind, item size and name.
template <class T>
struct BufferType;
template <>
struct BufferType<float> { static constexpr char kind = 'f'; static constexpr const char* name = "float32"; };
template <>
struct BufferType<double> { static constexpr char kind = 'f'; static constexpr const char* name = "float64"; };
template <>
struct BufferType<int64_t> { static constexpr char kind = 'i'; static constexpr const char* name = "int64"; };
template <>
struct BufferType<int8_t> { static constexpr char kind = 'i'; static constexpr const char* name = "int8"; };
template <>
struct BufferType<bool> { static constexpr char kind = 'b'; static constexpr const char* name = "bool"; };

// The dtype is compared by kind, size and byte order, never by object identity: an array that
// went through pickle (multiprocessing, joblib, Ray) carries an equal but distinct dtype object.
template <class T>
bool holds(const py::dtype& dt) {
  const char order = dt.byteorder();
  const bool native = order == '=' || order == '|' ||
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
                      order == '>';
#else
                      order == '<';
#endif
  return dt.kind() == BufferType<T>::kind && dt.itemsize() == static_cast<py::ssize_t>(sizeof(T)) && native;
}

template <class T>
void check_buffer(const py::array& a, const char* arg, py::ssize_t ndim) {
  if (!holds<T>(a.dtype()))
    throw py::type_error(std::string(arg) + ": expected dtype " + BufferType<T>::name + ", got " +
                         std::string(py::str(a.dtype())));
  if (a.ndim() != ndim)
    throw std::invalid_argument(std::string(arg) + ": expected a " + std::to_string(ndim) +
                                "-d array, got " + std::to_string(a.ndim()) + "-d");
  if (!(a.flags() & py::array::c_style))
    throw std::invalid_argument(std::string(arg) + ": array must be C-contiguous (try np.ascontiguousarray)");
  if (!(a.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_))
    throw std::invalid_argument(std::string(arg) + ": array must be aligned (try np.require(x, requirements='A'))");
}

// A row-major float32 matrix; returns its row count and checks its width against d (d < 0:
// take the width as d).
inline int64_t check_matrix(const py::array& a, const char* arg, int64_t& d) {
  check_buffer<float>(a, arg, 2);
  const int64_t cols = a.shape(1);
  if (d < 0) d = cols;
  else if (cols != d)
    throw std::invalid_argument(std::string(arg) + ": expected " + std::to_string(d) +
                                " columns to match the other inputs, got " + std::to_string(cols));
  return a.shape(0);
}

// A 1-d buffer of any length (length < 0) or of exactly `length`; returns its length.
template <class T>
int64_t check_vec(const py::array& a, const char* arg, int64_t length = -1) {
  check_buffer<T>(a, arg, 1);
  if (length >= 0 && a.shape(0) != length)
    throw std::invalid_argument(std::string(arg) + ": expected length " + std::to_string(length) + ", got " +
                                std::to_string(a.shape(0)));
  return a.shape(0);
}

template <class T>
void check_vector(const py::array& a, const char* arg, int64_t length) {
  check_vec<T>(a, arg, length);
}

template <class T>
const T* data_of(const py::array& a) { return static_cast<const T*>(a.data()); }

// A kernel's output vector handed to NumPy without a copy: the array owns it through a capsule.
template <class T>
py::array owned(std::vector<T>&& v, py::dtype dtype = py::dtype::of<T>()) {
  auto* heap = new std::vector<T>(std::move(v));
  py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array(dtype, {static_cast<py::ssize_t>(heap->size())}, {static_cast<py::ssize_t>(sizeof(T))},
                   heap->data(), owner);
}

}  // namespace rrag::bindings
