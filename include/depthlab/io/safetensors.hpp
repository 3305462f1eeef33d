#pragma once
// safetensors: the tensor file format of Hugging Face / PyTorch checkpoints.
//
//   [8 bytes]  N, little-endian u64: length of the header
//   [N bytes]  UTF-8 JSON object, padded with spaces to a multiple of 8 bytes:
//                {"__metadata__": {"key": "value", ...},              (optional, strings only)
//                 "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//   [rest]     the data: every tensor row-major, little-endian, at [begin, end) counted
//              from the first byte after the header. The tensors cover the data section
//              exactly: no overlap, no hole, nothing after the last one.
//
// Writing (safetensors_writer, save_safetensors) is atomic: the bytes go to a temporary file
// next to the target (`<path>.tmp.<pid>.<n>`), which is flushed, fsync'ed and renamed over
// the target; on any failure the temporary file is removed and io_error is thrown, so
// `path` either keeps its old content or has the complete new one.
//
// Reading (safetensors_file) validates the whole header when the file is opened (sizes,
// JSON, every entry, every offset) and throws io_error naming the file and the tensor; the
// data is read on demand with pread. Loading converts F32 <-> F64 on request, nothing else.
// POSIX only (open/pread/fsync/rename); the host must be little-endian.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "depthlab/core/error.hpp"
#include "depthlab/core/shape.hpp"
#include "depthlab/core/tensor.hpp"

namespace depthlab::io {

static_assert(std::endian::native == std::endian::little, "depthlab::io reads and writes safetensors on little-endian hosts only");

using metadata_map = std::map<std::string, std::string>;

/// One tensor of a safetensors header. `begin`/`end` are byte offsets into the data section.
struct tensor_entry {
    std::string dtype;
    Shape shape;
    std::uint64_t begin = 0, end = 0;
};

// ---------------------------------------------------------------------------------------
// dtypes
// ---------------------------------------------------------------------------------------

/// The safetensors dtype of a C++ element type (F32, F64, I64, I32, ...).
template <class T>
struct dtype_of;
template <> struct dtype_of<float> { static constexpr const char* name = "F32"; };
template <> struct dtype_of<double> { static constexpr const char* name = "F64"; };
template <> struct dtype_of<std::int64_t> { static constexpr const char* name = "I64"; };
template <> struct dtype_of<std::int32_t> { static constexpr const char* name = "I32"; };
template <> struct dtype_of<std::int16_t> { static constexpr const char* name = "I16"; };
template <> struct dtype_of<std::int8_t> { static constexpr const char* name = "I8"; };
template <> struct dtype_of<std::uint64_t> { static constexpr const char* name = "U64"; };
template <> struct dtype_of<std::uint32_t> { static constexpr const char* name = "U32"; };
template <> struct dtype_of<std::uint16_t> { static constexpr const char* name = "U16"; };
template <> struct dtype_of<std::uint8_t> { static constexpr const char* name = "U8"; };

/// Bytes per element of a safetensors dtype, 0 if the dtype is unknown. Every dtype of the
/// format is known (so that files holding e.g. BF16 tensors open and their other tensors
/// load), though only those with a dtype_of<> can be loaded.
inline std::size_t dtype_size(const std::string& dtype) {
    static const std::map<std::string, std::size_t, std::less<>> sizes = {
        {"BOOL", 1}, {"U8", 1}, {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
        {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
    const auto it = sizes.find(dtype);
    return it == sizes.end() ? 0 : it->second;
}

// ---------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------

/// Receives the bytes of one tensor (any number of calls).
using byte_sink = std::function<void(const void* data, std::size_t bytes)>;
/// Produces the bytes of one tensor into the sink; must give exactly the declared size.
using byte_producer = std::function<void(const byte_sink&)>;

namespace detail {
inline std::atomic<std::uint64_t>& temp_counter() {
    static std::atomic<std::uint64_t> n{0};
    return n;
}
inline std::string errno_text(int err) { return std::strerror(err); }
}  // namespace detail

/// Collects named tensors and metadata, then writes them atomically with write(path).
/// Tensors are held by handle (shared storage): their values are read during write().
class safetensors_writer {
public:
    /// Adds a tensor (float, double, int64, or another type with a dtype_of<>).
    template <class T, class B>
    void add(const std::string& name, const Tensor<T, B>& t) {
        DEPTHLAB_CHECK(t.defined(), usage_error, "safetensors_writer: tensor '", name, "' is undefined");
        const Tensor<T, B> held = t;
        add_raw(name, dtype_of<T>::name, t.shape(), [held](const byte_sink& put) {
            if constexpr (B::host_accessible) {
                const Tensor<T, B> c = held.contiguous();
                put(c.data(), static_cast<std::size_t>(c.numel()) * sizeof(T));
            } else {
                const std::vector<T> v = held.to_vector();
                put(v.data(), v.size() * sizeof(T));
            }
        });
    }
    /// Adds a tensor whose bytes come from `produce` during write(). It must put exactly
    /// shape.numel() * dtype_size(dtype) bytes (checked); an exception it throws aborts the
    /// write (the target is left untouched). Also the hook the tests use to fail midway.
    void add_raw(const std::string& name, const std::string& dtype, const Shape& shape, byte_producer produce) {
        DEPTHLAB_CHECK(!name.empty(), usage_error, "safetensors_writer: empty tensor name");
        DEPTHLAB_CHECK(name != "__metadata__", usage_error, "safetensors_writer: '__metadata__' is reserved, not a tensor name");
        DEPTHLAB_CHECK(names_.insert(name).second, usage_error, "safetensors_writer: duplicate tensor name '", name, "'");
        const std::size_t size = dtype_size(dtype);
        DEPTHLAB_CHECK(size != 0, usage_error, "safetensors_writer: tensor '", name, "' has unknown dtype '", dtype, "'");
        DEPTHLAB_CHECK(shape.is_concrete(), usage_error, "safetensors_writer: tensor '", name, "' has shape ", shape,
                       " with an inferred extent");
        records_.push_back({name, dtype, shape, static_cast<std::uint64_t>(shape.numel()) * size, std::move(produce)});
    }
    void set_metadata(metadata_map m) { metadata_ = std::move(m); }
    void add_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
    [[nodiscard]] const metadata_map& metadata() const { return metadata_; }
    [[nodiscard]] std::size_t size() const { return records_.size(); }

    /// The header JSON (without the length field), padded with spaces so that its length
    /// is a multiple of 8. Offsets follow the order in which tensors were added.
    [[nodiscard]] std::string header() const {
        nlohmann::ordered_json h = nlohmann::ordered_json::object();
        if (!metadata_.empty()) {
            nlohmann::ordered_json m = nlohmann::ordered_json::object();
            for (const auto& [k, v] : metadata_) m[k] = v;
            h["__metadata__"] = std::move(m);
        }
        std::uint64_t offset = 0;
        for (const record& r : records_) {
            nlohmann::ordered_json e = nlohmann::ordered_json::object();
            e["dtype"] = r.dtype;
            e["shape"] = std::vector<index_t>(r.shape.begin(), r.shape.end());
            e["data_offsets"] = {offset, offset + r.bytes};
            offset += r.bytes;
            h[r.name] = std::move(e);
        }
        std::string s;
        try {
            s = h.dump();
        } catch (const nlohmann::json::exception& e) {  // invalid UTF-8 in a name or in metadata
            throw usage_error(depthlab::detail::cat("safetensors_writer: cannot encode the header: ", e.what()));
        }
        s.append((8 - s.size() % 8) % 8, ' ');
        return s;
    }

    /// Writes the file atomically (see the top of this header). Throws io_error naming
    /// `path` on failure, after removing the temporary file; `path` is then untouched.
    void write(const std::string& path) const {
        const std::string head = header();
        const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(detail::temp_counter()++);
        std::FILE* f = std::fopen(tmp.c_str(), "wbx");  // x: never reuse someone else's file
        if (f == nullptr)
            throw io_error(depthlab::detail::cat("save_safetensors ", path, ": cannot create temporary file ", tmp, ": ",
                                                 detail::errno_text(errno)));
        struct failure {
            std::string why;
        };
        auto cleanup = [&] {
            if (f != nullptr) std::fclose(f);
            f = nullptr;
            std::remove(tmp.c_str());
        };
        std::string why;
        try {
            auto put = [&](const void* data, std::size_t n) {
                if (n != 0 && std::fwrite(data, 1, n, f) != n)
                    throw failure{depthlab::detail::cat("write failed: ", detail::errno_text(errno))};
            };
            unsigned char len[8];
            for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(head.size()) >> (8 * i));
            put(len, 8);
            put(head.data(), head.size());
            for (const record& r : records_) {
                std::uint64_t got = 0;
                const byte_sink sink = [&](const void* data, std::size_t n) {
                    if (got + n > r.bytes)
                        throw failure{depthlab::detail::cat("tensor '", r.name, "': producer gave more than the ", r.bytes,
                                                            " bytes of shape ", r.shape, " ", r.dtype)};
                    put(data, n);
                    got += n;
                };
                r.produce(sink);
                if (got != r.bytes)
                    throw failure{depthlab::detail::cat("tensor '", r.name, "': producer gave ", got, " bytes, shape ", r.shape,
                                                        " ", r.dtype, " needs ", r.bytes)};
            }
            if (std::fflush(f) != 0) throw failure{depthlab::detail::cat("flush failed: ", detail::errno_text(errno))};
            if (::fsync(::fileno(f)) != 0) throw failure{depthlab::detail::cat("fsync failed: ", detail::errno_text(errno))};
            const int rc = std::fclose(f);
            f = nullptr;
            if (rc != 0) throw failure{depthlab::detail::cat("close failed: ", detail::errno_text(errno))};
            if (std::rename(tmp.c_str(), path.c_str()) != 0)
                throw failure{depthlab::detail::cat("cannot rename ", tmp, " over it: ", detail::errno_text(errno))};
        } catch (const failure& e) {
            why = e.why;
        } catch (const std::exception& e) {
            why = depthlab::detail::cat("write aborted: ", e.what());
        } catch (...) {
            cleanup();
            throw;
        }
        if (!why.empty()) {
            cleanup();
            throw io_error(depthlab::detail::cat("save_safetensors ", path, ": ", why));
        }
        sync_directory(path);
    }

private:
    struct record {
        std::string name, dtype;
        Shape shape;
        std::uint64_t bytes;
        byte_producer produce;
    };
    /// Makes the rename durable (best effort: some file systems refuse fsync on a directory).
    static void sync_directory(const std::string& path) {
        const std::size_t slash = path.find_last_of('/');
        const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
        const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            (void)::fsync(fd);
            ::close(fd);
        }
    }

    std::vector<record> records_;
    std::set<std::string> names_;
    metadata_map metadata_;
};

/// Writes named tensors of one element type (plus metadata) atomically.
template <class T, class B>
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor<T, B>>>& tensors,
                      const metadata_map& metadata = {}) {
    safetensors_writer w;
    for (const auto& [name, t] : tensors) w.add(name, t);
    w.set_metadata(metadata);
    w.write(path);
}

/// A host tensor of one of the three checkpoint dtypes.
using any_tensor = std::variant<Tensor<float>, Tensor<double>, Tensor<std::int64_t>>;

/// Writes named tensors of mixed dtypes (F32, F64, I64) plus metadata atomically.
inline void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, any_tensor>>& tensors,
                             const metadata_map& metadata = {}) {
    safetensors_writer w;
    for (const auto& [name, t] : tensors) std::visit([&, &n = name](const auto& x) { w.add(n, x); }, t);
    w.set_metadata(metadata);
    w.write(path);
}

}  // namespace depthlab::io
