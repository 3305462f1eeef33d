#pragma once
// Tensor<T, Backend>: a strided view on reference-counted, 64-byte aligned device memory.
// Views (reshape, transpose, slice, select) share storage; contiguous()/clone() copy.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iomanip>
#include <memory>
#include <new>
#include <ostream>
#include <span>
#include <type_traits>
#include <vector>

#include "depthlab/backend/backend.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/core/shape.hpp"

namespace depthlab {

template <class T, class B = backend::cpu>
class Tensor {
    static_assert(std::is_floating_point_v<T> || std::is_integral_v<T>, "Tensor holds arithmetic values");

public:
    using value_type = T;
    using backend_type = B;

    Tensor() = default;
    /// Zero-initialised tensor of the given shape.
    explicit Tensor(const Shape& shape) : Tensor(empty(shape)) { zero_(); }

    // ---- factories ----
    // (T* data() is device memory of B: pass it to primitives<B>, never dereference it
    //  unless B::host_accessible.)
    /// Uninitialised contents: only for outputs that are fully written before being read.
    static Tensor empty(const Shape& shape) {
        DEPTHLAB_CHECK(shape.is_concrete(), shape_error, "Tensor: shape ", shape, " has an inferred (-1) extent");
        Tensor t;
        t.shape_ = shape;
        t.strides_ = contiguous_strides(shape);
        try {
            t.storage_ = memory<B>::template allocate<T>(static_cast<std::size_t>(shape.numel()));
        } catch (const std::bad_alloc&) {  // (what a program can act on: which tensor, how large)
            const double bytes = static_cast<double>(shape.numel()) * static_cast<double>(sizeof(T));
            throw memory_error(detail::cat("out of memory: a tensor ", shape, " of ", bytes / (1024.0 * 1024.0 * 1024.0), " GiB could not be allocated"));
        }
        return t;
    }
    static Tensor zeros(const Shape& shape) { return Tensor(shape); }
    static Tensor full(const Shape& shape, T value) {
        Tensor t = empty(shape);
        t.fill_(value);
        return t;
    }
    static Tensor ones(const Shape& shape) { return full(shape, T(1)); }
    static Tensor from(const Shape& shape, std::span<const T> values) {
        DEPTHLAB_CHECK(static_cast<index_t>(values.size()) == shape.numel(), shape_error, "Tensor::from: ", values.size(),
                       " values for shape ", shape, " (", shape.numel(), " elements)");
        Tensor t = empty(shape);
        memory<B>::from_host(values.data(), t.data(), values.size());
        return t;
    }
    static Tensor from(const Shape& shape, std::initializer_list<T> values) {
        return from(shape, std::span<const T>(values.begin(), values.size()));
    }
    static Tensor from(const Shape& shape, const std::vector<T>& values) { return from(shape, std::span<const T>(values)); }
    /// Normal(mean, std) from a seeded generator: reproducible whatever the thread count.
    static Tensor randn(const Shape& shape, Generator& gen, double stddev = 1.0, double mean = 0.0) {
        std::vector<T> v(static_cast<std::size_t>(shape.numel()));
        const std::uint64_t first = gen.reserve(2 * v.size());
        for (std::size_t i = 0; i < v.size(); ++i)
            v[i] = static_cast<T>(mean + stddev * Generator::box_muller(gen.word(first + 2 * i), gen.word(first + 2 * i + 1)));
        return from(shape, v);
    }
    /// Uniform in [lo, hi).
    static Tensor uniform(const Shape& shape, Generator& gen, double lo = 0.0, double hi = 1.0) {
        std::vector<T> v(static_cast<std::size_t>(shape.numel()));
        const std::uint64_t first = gen.reserve(v.size());
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(lo + (hi - lo) * Generator::to_unit(gen.word(first + i)));
        return from(shape, v);
    }

    // ---- properties ----
    [[nodiscard]] bool defined() const { return storage_ != nullptr; }
    [[nodiscard]] const Shape& shape() const { return shape_; }
    [[nodiscard]] const Shape& strides() const { return strides_; }
    [[nodiscard]] int rank() const { return shape_.rank(); }
    [[nodiscard]] index_t dim(int i) const { return shape_.dim(i); }
    [[nodiscard]] index_t numel() const { return shape_.numel(); }
    [[nodiscard]] T* data() { return storage_.get() + offset_; }
    [[nodiscard]] const T* data() const { return storage_.get() + offset_; }
    [[nodiscard]] bool is_contiguous() const {
        index_t expect = 1;
        for (int i = rank() - 1; i >= 0; --i) {
            if (shape_[i] != 1 && strides_[i] != expect) return false;
            expect *= shape_[i];
        }
        return true;
    }
    /// True when both views point to the same memory block.
    [[nodiscard]] bool shares_storage(const Tensor& o) const { return storage_ == o.storage_; }

    // ---- views ----
    /// Same data, new shape; one extent may be -1 (inferred). Copies only if not contiguous.
    [[nodiscard]] Tensor reshape(Shape s) const {
        index_t known = 1;
        int infer = -1;
        for (int i = 0; i < s.rank(); ++i) {
            if (s[i] == -1) {
                DEPTHLAB_CHECK(infer < 0, shape_error, "reshape: more than one -1 in ", s);
                infer = i;
            } else {
                known *= s[i];
            }
        }
        if (infer >= 0) {
            DEPTHLAB_CHECK(known > 0 && numel() % known == 0, shape_error, "reshape: cannot reshape ", shape_, " into ", s);
            s[infer] = numel() / known;
        }
        DEPTHLAB_CHECK(s.numel() == numel(), shape_error, "reshape: cannot reshape ", shape_, " (", numel(), " elements) into ",
                       s, " (", s.numel(), " elements)");
        Tensor t = is_contiguous() ? *this : contiguous();
        t.shape_ = s;
        t.strides_ = contiguous_strides(s);
        return t;
    }
    /// Swap two axes (a view: no copy).
    [[nodiscard]] Tensor transpose(int a, int b) const {
        Tensor t = *this;
        a = shape_.axis(a);
        b = shape_.axis(b);
        std::swap(t.shape_[a], t.shape_[b]);
        std::swap(t.strides_[a], t.strides_[b]);
        return t;
    }
    /// Elements [start, stop) along an axis (a view).
    [[nodiscard]] Tensor slice(int axis, index_t start, index_t stop) const {
        const int a = shape_.axis(axis);
        DEPTHLAB_CHECK(0 <= start && start <= stop && stop <= shape_[a], index_error, "slice: range [", start, ", ", stop,
                       ") out of bounds for axis ", axis, " of shape ", shape_);
        Tensor t = *this;
        t.offset_ += start * strides_[a];
        t.shape_[a] = stop - start;
        return t;
    }
    /// Index `i` along an axis, dropping that axis (a view).
    [[nodiscard]] Tensor select(int axis, index_t i) const {
        const int a = shape_.axis(axis);
        DEPTHLAB_CHECK(0 <= i && i < shape_[a], index_error, "select: index ", i, " out of bounds for axis ", axis, " of shape ",
                       shape_);
        Tensor t;
        t.storage_ = storage_;
        t.offset_ = offset_ + i * strides_[a];
        for (int k = 0; k < rank(); ++k) {
            if (k == a) continue;
            t.shape_.push_back(shape_[k]);
            t.strides_.push_back(strides_[k]);
        }
        return t;
    }

    // ---- copies ----
    [[nodiscard]] Tensor contiguous() const {
        if (is_contiguous()) return *this;
        Tensor t = empty(shape_);
        t.copy_(*this);
        return t;
    }
    [[nodiscard]] Tensor clone() const {
        Tensor t = empty(shape_);
        t.copy_(*this);
        return t;
    }
    /// Copy values from a tensor of the same shape (any strides) into this view.
    Tensor& copy_(const Tensor& src) {
        DEPTHLAB_CHECK(src.shape() == shape_, shape_error, "copy_: source shape ", src.shape(), " != destination shape ", shape_);
        primitives<B>::copy_strided(shape_, src.data(), src.strides(), data(), strides_, /*accumulate=*/false);
        return *this;
    }
    /// this += src (same shape, any strides).
    Tensor& add_(const Tensor& src) {
        DEPTHLAB_CHECK(src.shape() == shape_, shape_error, "add_: source shape ", src.shape(), " != destination shape ", shape_);
        primitives<B>::copy_strided(shape_, src.data(), src.strides(), data(), strides_, /*accumulate=*/true);
        return *this;
    }
    Tensor& fill_(T value) {
        DEPTHLAB_CHECK(is_contiguous(), usage_error, "fill_: needs a contiguous tensor, got shape ", shape_);
        primitives<B>::fill(numel(), value, data());
        return *this;
    }
    Tensor& zero_() { return fill_(T(0)); }

    /// A copy converted to U (through the host: for set-up and tests, not inner loops).
    template <class U>
    [[nodiscard]] Tensor<U, B> cast() const {
        const std::vector<T> v = to_host();
        std::vector<U> u(v.begin(), v.end());
        return Tensor<U, B>::from(shape_, u);
    }
    /// A contiguous copy on backend B2 (through the host).
    template <class B2>
    [[nodiscard]] Tensor<T, B2> to() const {
        return Tensor<T, B2>::from(shape_, to_host());
    }

    // ---- host access ----
    /// The values in row-major order, copied to the host: on a device, a synchronisation.
    /// This is the one way values leave a device; call it where an algorithm needs a host
    /// decision, not per element.
    [[nodiscard]] std::vector<T> to_host() const {
        const Tensor c = contiguous();
        std::vector<T> v(static_cast<std::size_t>(numel()));
        memory<B>::to_host(c.data(), v.data(), v.size());
        return v;
    }
    /// The same as to_host().
    [[nodiscard]] std::vector<T> to_vector() const { return to_host(); }
    template <class... I>
    [[nodiscard]] T& operator()(I... idx) {
        static_assert(B::host_accessible, "element access needs a host backend: use to_host()");
        return *(data() + offset_of({static_cast<index_t>(idx)...}));
    }
    template <class... I>
    [[nodiscard]] const T& operator()(I... idx) const {
        static_assert(B::host_accessible, "element access needs a host backend: use to_host()");
        return *(data() + offset_of({static_cast<index_t>(idx)...}));
    }
    [[nodiscard]] T item() const {
        DEPTHLAB_CHECK(numel() == 1, shape_error, "item: tensor of shape ", shape_, " has ", numel(), " elements, not 1");
        T v;
        memory<B>::to_host(data(), &v, 1);
        return v;
    }

    friend std::ostream& operator<<(std::ostream& os, const Tensor& t) {
        os << "Tensor" << t.shape_ << " " << B::name << "\n";
        if (!t.defined()) return os << "  (undefined)\n";
        const std::vector<T> v = t.to_vector();
        const index_t cols = t.rank() == 0 ? 1 : std::max<index_t>(t.shape_.back(), 1);
        const index_t max_shown = 64;
        for (index_t i = 0; i < static_cast<index_t>(v.size()) && i < max_shown; ++i) {
            os << (i % cols == 0 ? "  " : " ") << std::setprecision(6) << v[static_cast<std::size_t>(i)];
            if ((i + 1) % cols == 0) os << "\n";
        }
        if (static_cast<index_t>(v.size()) > max_shown) os << "  ... (" << v.size() - max_shown << " more)\n";
        return os;
    }

private:
    index_t offset_of(std::initializer_list<index_t> idx) const {
        DEPTHLAB_CHECK(static_cast<int>(idx.size()) == rank(), index_error, "Tensor(): ", idx.size(), " indices for shape ", shape_);
        index_t off = 0;
        int k = 0;
        for (index_t i : idx) {
            DEPTHLAB_CHECK(0 <= i && i < shape_[k], index_error, "Tensor(): index ", i, " out of range for axis ", k, " of shape ",
                           shape_);
            off += i * strides_[k++];
        }
        return off;
    }

    std::shared_ptr<T> storage_;
    index_t offset_ = 0;
    Shape shape_;
    Shape strides_;
};

/// Throws shape_error naming `op` unless a and b have the same shape.
template <class A, class Bt>
void check_same_shape(const char* op, const A& a, const Bt& b) {
    DEPTHLAB_CHECK(a.shape() == b.shape(), shape_error, op, ": shapes ", a.shape(), " and ", b.shape(), " differ");
}

}  // namespace depthlab
