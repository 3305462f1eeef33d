#pragma once
// Shape: a small fixed-capacity list of extents (rank <= 8). Row-major ("C") strides.
#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>

#include "depthlab/core/error.hpp"

namespace depthlab {

using index_t = std::int64_t;

class Shape {
public:
    static constexpr int max_rank = 8;

    Shape() = default;
    Shape(std::initializer_list<index_t> dims) { assign(dims.begin(), dims.end()); }
    template <class It>
    Shape(It first, It last) { assign(first, last); }

    [[nodiscard]] int rank() const { return rank_; }
    [[nodiscard]] index_t operator[](int i) const { return dims_[static_cast<std::size_t>(i)]; }
    index_t& operator[](int i) { return dims_[static_cast<std::size_t>(i)]; }
    /// Dimension with Python-style negative indexing; throws on out-of-range.
    [[nodiscard]] index_t dim(int i) const { return dims_[static_cast<std::size_t>(axis(i))]; }
    [[nodiscard]] int axis(int i) const {
        const int a = i < 0 ? i + rank_ : i;
        DEPTHLAB_CHECK(a >= 0 && a < rank_, index_error, "axis ", i, " out of range for shape ", to_string());
        return a;
    }
    /// True when no extent is -1.
    [[nodiscard]] bool is_concrete() const { return std::all_of(begin(), end(), [](index_t d) { return d >= 0; }); }
    [[nodiscard]] index_t numel() const {
        index_t n = 1;
        for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<std::size_t>(i)];
        return n;
    }
    [[nodiscard]] const index_t* begin() const { return dims_.data(); }
    [[nodiscard]] const index_t* end() const { return dims_.data() + rank_; }
    [[nodiscard]] index_t back() const { return dims_[static_cast<std::size_t>(rank_ - 1)]; }

    void push_back(index_t d) {
        DEPTHLAB_CHECK(rank_ < max_rank, shape_error, "Shape: rank above ", max_rank);
        DEPTHLAB_CHECK(d >= -1, shape_error, "Shape: negative extent ", d, " (only -1, 'inferred', is allowed, in reshape)");
        dims_[static_cast<std::size_t>(rank_++)] = d;
    }
    /// Same shape with the last dimension replaced.
    [[nodiscard]] Shape with_back(index_t d) const {
        Shape s = *this;
        s[rank_ - 1] = d;
        return s;
    }
    /// Product of all dimensions but the last ("rows" of a row-major matrix view).
    [[nodiscard]] index_t rows() const {
        index_t n = 1;
        for (int i = 0; i + 1 < rank_; ++i) n *= dims_[static_cast<std::size_t>(i)];
        return n;
    }

    friend bool operator==(const Shape& a, const Shape& b) {
        return a.rank_ == b.rank_ && std::equal(a.begin(), a.end(), b.begin());
    }
    [[nodiscard]] std::string to_string() const {
        std::string s = "(";
        for (int i = 0; i < rank_; ++i) {
            if (i) s += ", ";
            s += std::to_string(dims_[static_cast<std::size_t>(i)]);
        }
        if (rank_ == 1) s += ",";
        return s + ")";
    }
    friend std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.to_string(); }

private:
    template <class It>
    void assign(It first, It last) {
        for (; first != last; ++first) push_back(static_cast<index_t>(*first));
    }
    std::array<index_t, max_rank> dims_{};
    int rank_ = 0;
};

/// Row-major strides of a contiguous tensor of this shape.
inline Shape contiguous_strides(const Shape& s) {
    Shape st = s;
    index_t acc = 1;
    for (int i = s.rank() - 1; i >= 0; --i) {
        st[i] = acc;
        acc *= std::max<index_t>(s[i], 1);
    }
    return st;
}

}  // namespace depthlab
