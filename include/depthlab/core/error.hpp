#pragma once
// Errors: every check in depthlab throws a subclass of depthlab::error whose message names
// the operation and the offending shapes, indices or path. Nothing is left to UB.
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace depthlab {

class error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};
/// Operand shapes that do not fit the operation (also broadcasting mistakes).
class shape_error : public error { public: using error::error; };
/// An index or id outside its valid range.
class index_error : public error { public: using error::error; };
/// A file that is missing, truncated or corrupt.
class io_error : public error { public: using error::error; };
/// A non-finite value where a finite one is required.
class numeric_error : public error { public: using error::error; };
/// A misuse of the API (e.g. backward through a graph without gradients).
class usage_error : public error { public: using error::error; };
/// A failure reported by a device runtime (CUDA, cuBLAS): no device, out of device memory.
class device_error : public error { public: using error::error; };
/// Host memory exhausted: a tensor that could not be allocated (its shape and bytes named).
class memory_error : public error { public: using error::error; };

namespace detail {
template <class... A>
[[nodiscard]] std::string cat(A&&... parts) {
    std::ostringstream os;
    (os << ... << std::forward<A>(parts));
    return os.str();
}
}  // namespace detail

}  // namespace depthlab

/// DEPTHLAB_CHECK(cond, kind, message parts...): throws depthlab::kind with the parts
/// concatenated when cond is false. The message parts are only evaluated on failure.
#define DEPTHLAB_CHECK(cond, kind, ...)                                       \
    do {                                                                      \
        if (!(cond)) [[unlikely]]                                             \
            throw ::depthlab::kind(::depthlab::detail::cat(__VA_ARGS__));     \
    } while (0)
