// icoforge CPU runtime: turns GT4Py call arguments into raw pointers + strides, once per call.
// Included by every generated C++ program (the generated file is a CPython extension module).
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdarg>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

namespace icf {

// A field seen as: base pointer already shifted so that base[i*s[0] + k*s[1]] is element
// (i, k) in absolute indices; [start, stop) per dimension; the underlying buffer's extent.
struct View {
  char* base = nullptr;
  long s[3] = {0, 0, 0};
  long start[3] = {0, 0, 0};
  long stop[3] = {0, 0, 0};
  const char* lo = nullptr;  // buffer extent, for the aliasing check
  const char* hi = nullptr;
  template <class T> T* ptr() const { return reinterpret_cast<T*>(base); }
};

// Owns the Py_buffers of one call and releases them at the end.
struct CallScope {
  std::vector<Py_buffer> buffers;
  std::vector<PyObject*> refs;
  std::vector<std::unique_ptr<char[]>> copies;  // snapshots of read fields (`snapshot`)
  ~CallScope() {
    for (auto& b : buffers) PyBuffer_Release(&b);
    for (auto* r : refs) Py_DECREF(r);
  }
};

static PyObject* error_class = PyExc_ValueError;

inline bool fail(const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  PyErr_SetString(error_class, msg);
  return false;
}

// `obj` is a GT4Py field (has .ndarray and __gt_origin__) or a bare NumPy array.
inline bool get_view(CallScope& scope, PyObject* obj, const char* name, int ndim, Py_ssize_t itemsize,
                     const char* program, View* v) {
  PyObject* arr = PyObject_GetAttrString(obj, "ndarray");
  if (!arr) {
    PyErr_Clear();
    arr = obj;
    Py_INCREF(arr);
  }
  scope.refs.push_back(arr);
  Py_buffer b;
  if (PyObject_GetBuffer(arr, &b, PyBUF_STRIDES | PyBUF_FORMAT) != 0) {
    PyErr_Clear();
    return fail("%s: argument '%s' is not a CPU field (no buffer interface)", program, name);
  }
  scope.buffers.push_back(b);
  if (b.ndim != ndim)
    return fail("%s: field '%s' has %d dimensions, expected %d", program, name, (int)b.ndim, ndim);
  if (b.itemsize != itemsize)
    return fail("%s: field '%s' has %d-byte elements, expected %d", program, name, (int)b.itemsize, (int)itemsize);
  long origin[3] = {0, 0, 0};
  PyObject* org = PyObject_GetAttrString(obj, "__gt_origin__");
  if (org) {
    scope.refs.push_back(org);
    for (int d = 0; d < ndim && d < PyTuple_Size(org); ++d) origin[d] = PyLong_AsLong(PyTuple_GetItem(org, d));
  } else {
    PyErr_Clear();
  }
  char* base = static_cast<char*>(b.buf);
  for (int d = 0; d < ndim; ++d) {
    if (b.strides[d] % itemsize != 0) return fail("%s: field '%s' has unaligned strides", program, name);
    v->s[d] = b.strides[d] / itemsize;
    v->start[d] = -origin[d];
    v->stop[d] = -origin[d] + b.shape[d];
    base += origin[d] * b.strides[d];
  }
  v->base = base;
  v->lo = static_cast<const char*>(b.buf);
  v->hi = v->lo + b.len;
  return true;
}

template <class T> inline bool get_scalar(PyObject* obj, const char* name, const char* program, T* out) {
  if constexpr (std::is_same_v<T, bool>) {
    int r = PyObject_IsTrue(obj);
    if (r < 0) return false;
    *out = r != 0;
  } else if constexpr (std::is_floating_point_v<T>) {
    double d = PyFloat_AsDouble(obj);
    if (d == -1.0 && PyErr_Occurred()) return false;
    *out = static_cast<T>(d);
  } else {
    PyObject* idx = PyNumber_Index(obj);
    if (!idx) return fail("%s: scalar argument '%s' is not an integer", program, name);
    long long x = PyLong_AsLongLong(idx);
    Py_DECREF(idx);
    if (x == -1 && PyErr_Occurred()) return false;
    *out = static_cast<T>(x);
  }
  return true;
}

inline bool get_table(CallScope& scope, PyObject* offset_provider, const char* tag, Py_ssize_t itemsize,
                      const char* program, View* v) {
  if (!offset_provider || !PyDict_Check(offset_provider))
    return fail("%s: offset_provider must be a dict", program);
  PyObject* conn = PyDict_GetItemString(offset_provider, tag);
  if (!conn) return fail("%s: offset_provider lacks connectivity '%s'", program, tag);
  return get_view(scope, conn, tag, 2, itemsize, program, v);
}

// Whether a field argument has its horizontal dimension contiguous and its levels strided (GT4Py's
// CPU allocators), not the levels contiguous (NumPy's C order): the layout the temporaries take.
inline bool horizontal_inner(const View& v) { return v.s[0] == 1 && v.s[1] != 1; }

// Row count of a connectivity (the size of its source dimension); -1 when unknown.
inline long table_rows(PyObject* offset_provider, const char* tag) {
  PyObject* conn = offset_provider && PyDict_Check(offset_provider) ? PyDict_GetItemString(offset_provider, tag) : nullptr;
  if (!conn) return -1;
  PyObject* shape = PyObject_GetAttrString(conn, "shape");
  if (!shape) { PyErr_Clear(); return -1; }
  long rows = PyTuple_Check(shape) && PyTuple_Size(shape) > 0 ? PyLong_AsLong(PyTuple_GetItem(shape, 0)) : -1;
  Py_DECREF(shape);
  return rows;
}

// The field must hold [lo, hi) along dimension d (skipped for an empty range).
inline bool require(const View& v, int d, long lo, long hi, const char* field, const char* dim,
                    const char* kernel) {
  if (lo >= hi || hi < 0) return true;  // empty range, or a size that was not known
  if (lo < v.start[d] || hi > v.stop[d])
    return fail("%s: field '%s' covers %s [%ld, %ld) but the kernel accesses [%ld, %ld)", kernel, field, dim,
                v.start[d], v.stop[d], lo, hi);
  return true;
}

// [lo, hi) of the indices that rows [h0, h1) of neighbour table `t` hold (skip entries ignored;
// empty when none): what a kernel over those rows reads of the target dimension. Scanned on every
// call, not memoized: it is 1/levels of the table reads the kernel itself does, and a memo keyed
// by buffer address could outlive the table it describes. On a limited-area grid GT4Py sizes
// temporaries to exactly this range (e.g. no lateral-boundary vertices), so the whole target
// dimension would be the wrong requirement.
template <class T>
inline void table_targets(const View& t, long h0, long h1, long skip, long* lo, long* hi) {
  long mn = LONG_MAX, mx = LONG_MIN;
  const T* p = t.ptr<T>();
  for (long r = std::max(h0, t.start[0]); r < std::min(h1, t.stop[0]); ++r)
    for (long c = t.start[1]; c < t.stop[1]; ++c) {
      const long v = static_cast<long>(p[r * t.s[0] + c * t.s[1]]);
      if (v == skip) continue;
      mn = v < mn ? v : mn;
      mx = v > mx ? v : mx;
    }
  if (mx == LONG_MIN) { *lo = 0; *hi = 0; return; }  // nothing referenced
  *lo = mn;
  *hi = mx + 1;
}

struct Named {
  const View* view;
  const char* name;
};

// Kernels declare every pointer __restrict__: refuse a call where a written field shares memory
// with another field of the same kernel (the same field read and written under one name is fine).
inline bool no_alias(std::initializer_list<Named> written, std::initializer_list<Named> all, const char* kernel) {
  for (const Named& w : written)
    for (const Named& o : all)
      if (w.view != o.view && w.view->lo < o.view->hi && o.view->lo < w.view->hi)
        return fail("%s: field '%s' is written while its memory is also passed as '%s'; pass distinct fields",
                    kernel, w.name, o.name);
  return true;
}

inline bool overlap(const View* a, const View* b) { return a->lo < b->hi && b->lo < a->hi; }

// The aliasing of one kernel's fields: -1 (error set) where two fields it writes share memory
// (which write would win is GT4Py's to say, not ours), 1 where a field it writes shares memory with
// one it only reads (`snapshot` then copies the read one), else 0. The same field read and written
// under one name is not aliasing.
inline int aliasing(std::initializer_list<Named> written, std::initializer_list<Named> read_only, const char* kernel) {
  int found = 0;
  for (auto w = written.begin(); w != written.end(); ++w) {
    for (auto o = w + 1; o != written.end(); ++o)
      if (w->view != o->view && overlap(w->view, o->view)) {
        fail("%s: field '%s' is written while its memory is also passed as '%s'; pass distinct fields", kernel, w->name,
             o->name);
        return -1;
      }
    for (const Named& o : read_only)
      if (w->view != o.view && overlap(w->view, o.view)) found = 1;
  }
  return found;
}

// A kernel writes a field that shares memory with one it only reads (icon4py 0.4.1's tracer
// advection passes one tracer as both `tracer_now` and `tracer_new` in the second half of its
// Strang splitting): each such read field is copied (its whole buffer) and `views` (the kernel's
// own copy of the arguments) point at the copy, so the kernel reads the memory as it was before it
// ran, which is what GT4Py's statement means (its embedded backend computes the whole result before
// writing), and its __restrict__ pointers do not alias. The copies live until the call ends.
inline void snapshot(CallScope& scope, std::initializer_list<const View*> written, std::initializer_list<View*> views) {
  for (View* v : views) {
    bool shared = false;
    for (const View* w : written) shared = shared || overlap(w, v);  // the lists name different fields
    if (!shared) continue;
    const size_t bytes = size_t(v->hi - v->lo);
    scope.copies.emplace_back(new char[bytes]);
    char* copy = scope.copies.back().get();
    std::memcpy(copy, v->lo, bytes);
    v->base = copy + (v->base - v->lo);
    v->lo = copy;
    v->hi = copy + bytes;
  }
}

inline double all_bits_set() {
  uint64_t u = ~uint64_t(0);
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
}

// A temporary: one buffer per program, grown on demand, reused across calls. Laid out as the
// program's fields are (`h_inner`: the horizontal contiguous, GT4Py's CPU allocators; else the
// levels, NumPy's C order), so that a kernel reading fields and temporaries walks both the same way.
struct TempBuffer {
  std::vector<double> storage;  // double-aligned raw storage
  View view(long h0, long h1, long k0, long k1, bool has_h, bool has_k, Py_ssize_t itemsize, bool h_inner = false) {
    long nh = has_h ? std::max(0L, h1 - h0) : 1, nk = has_k ? std::max(0L, k1 - k0) : 1;
    size_t bytes = size_t(nh) * size_t(nk) * itemsize;
    // grown storage is poisoned (all bits set: a NaN as float64 and float32, -1 as an integer), not
    // zeroed, so a kernel reading a point of a temporary that no kernel wrote gives NaN in the outputs
    // on its first call (the verification fails it) instead of a plausible 0 (CUDA memory is not zeroed)
    if (storage.size() * sizeof(double) < bytes) storage.resize(bytes / sizeof(double) + 1, all_bits_set());
    View v;
    char* data = reinterpret_cast<char*>(storage.data());
    int d = 0;
    long off = 0;
    const long sh = (has_k && h_inner) ? 1 : nk, sk = (has_h && h_inner) ? nh : 1;
    if (has_h) { v.s[d] = sh; v.start[d] = h0; v.stop[d] = h1; off += h0 * sh; ++d; }
    if (has_k) { v.s[d] = sk; v.start[d] = k0; v.stop[d] = k1; off += k0 * sk; ++d; }
    v.base = data - off * itemsize;
    v.lo = data;
    v.hi = data + bytes;
    return v;
  }
};

template <class T> inline T floordiv(T a, T b) {
  T q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}

}  // namespace icf

#define icf_floordiv icf::floordiv
