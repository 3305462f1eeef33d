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
// Writing (safetensors_writer, save_safetensors) is atomic (io/atomic_file.hpp): `path`
// either keeps its old content or has the complete new one; on failure io_error is thrown
// and no temporary is left, and a temporary left by a killed writer is removed next time.
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
#include <tuple>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "depthlab/backend/cpu/cpu.hpp"  // Tensor<T> defaults to the CPU backend
#include "depthlab/core/error.hpp"
#include "depthlab/core/out_of_line.hpp"
#include "depthlab/core/shape.hpp"
#include "depthlab/core/tensor.hpp"
#include "depthlab/io/atomic_file.hpp"

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

/// Produces the bytes of one tensor into the sink; must give exactly the declared size.
using byte_producer = std::function<void(const byte_sink&)>;

namespace detail {
/// Why `name` cannot be a tensor name, or nullptr if it can. One rule for the writer and
/// the reader, so that every file depthlab opens could be written again: an empty name, a
/// NUL byte (C APIs and PyTorch's loader stop there) and the reserved "__metadata__" are out.
inline const char* invalid_tensor_name(std::string_view name) {
    if (name.empty()) return "an empty tensor name";
    // (a loop, not string_view::find: g++ 12 warns about find's memchr bound once this is inlined)
    for (const char c : name)
        if (c == '\0') return "a tensor name with a NUL byte";
    if (name == "__metadata__") return "'__metadata__', which is reserved for metadata, as a tensor name";
    return nullptr;
}
/// A name printable in an error message: NUL and other control bytes as \xNN.
inline std::string printable_name(std::string_view name) {
    std::string out;
    for (const char c : name) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", u);
            out += buf;
        } else {
            out += c;
        }
    }
    return out;
}
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
        const char* bad = detail::invalid_tensor_name(name);
        DEPTHLAB_CHECK(bad == nullptr, usage_error, "safetensors_writer: '", detail::printable_name(name), "' is ", bad);
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
    [[nodiscard]] std::string header() const;

    /// Writes the file atomically (see the top of this header). Throws io_error naming
    /// `path` on failure, after removing the temporary file; `path` is then untouched.
    void write(const std::string& path) const;

private:
    struct record {
        std::string name, dtype;
        Shape shape;
        std::uint64_t bytes;
        byte_producer produce;
    };
    std::vector<record> records_;
    std::set<std::string> names_;
    metadata_map metadata_;
};

// Defined outside the class: under DEPTHLAB_COMPILED a program links the library's copy and
// does not compile the JSON serializer again (include/depthlab/core/out_of_line.hpp).
#if DEPTHLAB_DEFINE_OUT_OF_LINE
DEPTHLAB_OUT_OF_LINE std::string safetensors_writer::header() const {
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

DEPTHLAB_OUT_OF_LINE void safetensors_writer::write(const std::string& path) const {
    const std::string head = header();
    write_atomically(path, "save_safetensors", [&](const byte_sink& put) {
        unsigned char len[8];
        for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(head.size()) >> (8 * i));
        put(len, 8);
        put(head.data(), head.size());
        for (const record& r : records_) {
            std::uint64_t got = 0;
            const byte_sink sink = [&](const void* data, std::size_t n) {
                DEPTHLAB_CHECK(got + n <= r.bytes, io_error, "tensor '", r.name, "': producer gave more than the ", r.bytes,
                               " bytes of shape ", r.shape, " ", r.dtype);
                put(data, n);
                got += n;
            };
            r.produce(sink);
            DEPTHLAB_CHECK(got == r.bytes, io_error, "tensor '", r.name, "': producer gave ", got, " bytes, shape ", r.shape, " ",
                           r.dtype, " needs ", r.bytes);
        }
    });
}
#endif  // DEPTHLAB_DEFINE_OUT_OF_LINE

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

// ---------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------

/// An open safetensors file whose header has been fully validated. Errors are io_error
/// with messages `checkpoint <path>: ...` that name the tensor at fault. The file stays
/// open (a file replaced by an atomic save keeps being read consistently); data is read
/// with pread, so const methods may be called from several threads.
class safetensors_file {
public:
    /// Headers above this size are refused (the reference implementation's limit).
    static constexpr std::uint64_t max_header_bytes = 100'000'000;

    /// Opens `path` and validates its header; throws io_error naming the file (and the tensor).
    explicit safetensors_file(std::string path);
    safetensors_file(const safetensors_file&) = delete;
    safetensors_file& operator=(const safetensors_file&) = delete;
    safetensors_file(safetensors_file&& o) noexcept
        : path_(std::move(o.path_)), fd_(std::exchange(o.fd_, -1)), file_size_(o.file_size_), data_start_(o.data_start_),
          entries_(std::move(o.entries_)), order_(std::move(o.order_)), metadata_(std::move(o.metadata_)) {}
    safetensors_file& operator=(safetensors_file&& o) noexcept {
        if (this != &o) {
            if (fd_ >= 0) ::close(fd_);
            path_ = std::move(o.path_);
            fd_ = std::exchange(o.fd_, -1);
            file_size_ = o.file_size_;
            data_start_ = o.data_start_;
            entries_ = std::move(o.entries_);
            order_ = std::move(o.order_);
            metadata_ = std::move(o.metadata_);
        }
        return *this;
    }
    ~safetensors_file() {
        if (fd_ >= 0) ::close(fd_);
    }

    [[nodiscard]] const std::string& path() const { return path_; }
    /// Tensor names in the order of their data in the file.
    [[nodiscard]] const std::vector<std::string>& names() const { return order_; }
    [[nodiscard]] bool contains(const std::string& name) const { return entries_.count(name) != 0; }
    /// The header entry of a tensor; throws io_error if the file has no such tensor.
    [[nodiscard]] const tensor_entry& entry(const std::string& name) const;
    [[nodiscard]] const metadata_map& metadata() const { return metadata_; }
    /// Byte offset of the data section in the file (8 + header length).
    [[nodiscard]] std::uint64_t data_start() const { return data_start_; }

    /// The raw little-endian bytes of a tensor.
    [[nodiscard]] std::vector<unsigned char> read_bytes(const std::string& name) const {
        const tensor_entry& e = entry(name);
        std::vector<unsigned char> v(static_cast<std::size_t>(e.end - e.begin));
        read_at(data_start_ + e.begin, v.data(), v.size(), name);
        return v;
    }

    /// A tensor as Tensor<T, B>. The dtype must be T's, except that F32 and F64 convert into
    /// each other; anything else (e.g. I64 into float) throws io_error.
    template <class T, class B = backend::cpu>
    [[nodiscard]] Tensor<T, B> load(const std::string& name) const {
        const tensor_entry& e = entry(name);
        const std::string want = dtype_of<T>::name;
        if (e.shape.numel() == 0 && (e.dtype == want || (std::is_floating_point_v<T> && (e.dtype == "F32" || e.dtype == "F64"))))
            return Tensor<T, B>::empty(e.shape);  // nothing to read (and no null pointer to copy from)
        if (e.dtype == want) return Tensor<T, B>::from(e.shape, read_values<T>(name, e));
        if constexpr (std::is_floating_point_v<T>) {
            if (e.dtype == "F32" || e.dtype == "F64") {
                std::vector<T> v;
                if (e.dtype == "F32") {
                    const std::vector<float> src = read_values<float>(name, e);
                    v.assign(src.begin(), src.end());
                } else {
                    const std::vector<double> src = read_values<double>(name, e);
                    v.reserve(src.size());
                    for (double x : src) v.push_back(static_cast<T>(x));
                }
                return Tensor<T, B>::from(e.shape, v);
            }
        }
        fail("tensor '", name, "' is ", e.dtype, ", cannot load it as ", want, " (only F32 <-> F64 convert)");
    }

    /// Loads a tensor into an existing one of the same shape, in place (dst keeps its
    /// storage, so every handle on it sees the new values). dst is only written once the
    /// whole tensor has been read.
    template <class T, class B>
    void load_into(const std::string& name, Tensor<T, B>& dst) const {
        const tensor_entry& e = entry(name);
        if (!(e.shape == dst.shape())) fail("tensor '", name, "' has shape ", e.shape, ", model expects ", dst.shape());
        dst.copy_(load<T, B>(name));
    }

private:
    template <class... A>
    [[noreturn]] void fail(A&&... parts) const {
        throw io_error(depthlab::detail::cat("checkpoint ", path_, ": ", std::forward<A>(parts)...));
    }


    void read_at(std::uint64_t offset, void* dst, std::size_t n, const std::string& what) const;
    void parse();
    tensor_entry parse_entry(const std::string& name, const nlohmann::json& v, std::uint64_t data_size) const;

    template <class T>
    std::vector<T> read_values(const std::string& name, const tensor_entry& e) const {
        std::vector<T> v(static_cast<std::size_t>(e.shape.numel()));
        read_at(data_start_ + e.begin, v.data(), v.size() * sizeof(T), "tensor '" + name + "'");
        return v;
    }



    std::string path_;
    int fd_ = -1;
    std::uint64_t file_size_ = 0, data_start_ = 0;
    std::map<std::string, tensor_entry> entries_;
    std::vector<std::string> order_;
    metadata_map metadata_;
};

// Defined outside the class: under DEPTHLAB_COMPILED a program links the library's copy and
// does not compile the JSON parser again (include/depthlab/core/out_of_line.hpp).
#if DEPTHLAB_DEFINE_OUT_OF_LINE
DEPTHLAB_OUT_OF_LINE safetensors_file::safetensors_file(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot open: ", detail::errno_text(errno));
    try {
        parse();
    } catch (...) {
        ::close(fd_);
        fd_ = -1;
        throw;
    }
}

DEPTHLAB_OUT_OF_LINE const tensor_entry& safetensors_file::entry(const std::string& name) const {
    const auto it = entries_.find(name);
    if (it == entries_.end()) {
        std::string have;
        std::size_t shown = 0;
        for (const std::string& n : order_) {
            if (shown++ == 16) {
                have += ", ...";
                break;
            }
            have += (have.empty() ? "" : ", ") + n;
        }
        fail("no tensor named '", name, "' (the file has ", order_.size(), ": ", have, ")");
    }
    return it->second;
}

DEPTHLAB_OUT_OF_LINE void safetensors_file::read_at(std::uint64_t offset, void* dst, std::size_t n, const std::string& what) const {
    auto* p = static_cast<unsigned char*>(dst);
    while (n > 0) {
        const ::ssize_t got = ::pread(fd_, p, std::min<std::size_t>(n, std::size_t{1} << 30), static_cast<::off_t>(offset));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) fail("reading ", what, ": ", detail::errno_text(errno));
        if (got == 0) fail("reading ", what, ": unexpected end of file at byte ", offset, " (the file shrank after it was opened?)");
        p += got;
        n -= static_cast<std::size_t>(got);
        offset += static_cast<std::uint64_t>(got);
    }
}

DEPTHLAB_OUT_OF_LINE void safetensors_file::parse() {
    struct ::stat st {};
    if (::fstat(fd_, &st) != 0) fail("cannot stat: ", detail::errno_text(errno));
    if (!S_ISREG(st.st_mode)) fail("not a regular file");
    file_size_ = static_cast<std::uint64_t>(st.st_size);
    if (file_size_ < 8)
        fail("file is ", file_size_, " bytes, shorter than the 8-byte header length field (truncated, or not safetensors)");
    unsigned char len[8];
    read_at(0, len, 8, "the header length");
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
    if (n > file_size_ - 8)
        fail("header length ", n, " exceeds the ", file_size_ - 8,
             " bytes that follow the length field (truncated, or not a safetensors file)");
    if (n > max_header_bytes) fail("header length ", n, " is above the ", max_header_bytes, "-byte limit");
    data_start_ = 8 + n;
    const std::uint64_t data_size = file_size_ - data_start_;
    std::string text(static_cast<std::size_t>(n), '\0');
    read_at(8, text.data(), text.size(), "the header");

    // nlohmann stops at a NUL byte as if the input ended there; JSON text has none.
    if (const std::size_t nul = text.find('\0'); nul != std::string::npos)
        fail("invalid JSON header (", n, " bytes): NUL byte at offset ", nul, " (wrong header length?)");
    // Parse, refusing duplicate keys (nlohmann would keep the last one silently).
    std::vector<std::set<std::string>> keys;
    const auto on_event = [&](int, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
        using ev_t = nlohmann::json::parse_event_t;
        if (ev == ev_t::object_start) keys.emplace_back();
        if (ev == ev_t::object_end && !keys.empty()) keys.pop_back();
        if (ev == ev_t::key && !keys.empty() && parsed.is_string() && !keys.back().insert(parsed.get<std::string>()).second)
            fail("invalid header: duplicate key '", parsed.get<std::string>(), "'");
        return true;
    };
    nlohmann::json h;
    try {
        h = nlohmann::json::parse(text, on_event);
    } catch (const nlohmann::json::exception& e) {
        fail("invalid JSON header (", n, " bytes): ", e.what());
    }
    if (!h.is_object()) fail("invalid header: a JSON ", h.type_name(), ", not an object");

    for (auto it = h.begin(); it != h.end(); ++it) {
        const std::string& name = it.key();
        const nlohmann::json& v = it.value();
        if (name == "__metadata__") {
            if (!v.is_object()) fail("'__metadata__' is a JSON ", v.type_name(), ", not an object");
            for (auto m = v.begin(); m != v.end(); ++m) {
                if (!m.value().is_string())
                    fail("metadata '", m.key(), "' is a JSON ", m.value().type_name(), ", not a string");
                metadata_[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        if (const char* bad = detail::invalid_tensor_name(name))
            fail("invalid header: '", detail::printable_name(name), "' is ", bad);
        entries_[name] = parse_entry(name, v, data_size);
    }

    // The tensors must tile the data section: no overlap, no hole, no trailing bytes.
    std::vector<std::pair<const std::string*, const tensor_entry*>> sorted;
    for (const auto& [name, e] : entries_) sorted.emplace_back(&name, &e);
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
        return std::tie(a.second->begin, a.second->end, *a.first) < std::tie(b.second->begin, b.second->end, *b.first);
    });
    std::uint64_t pos = 0;
    const std::string* prev = nullptr;
    for (const auto& [name, e] : sorted) {
        if (e->begin < pos)
            fail("tensor '", *name, "': data_offsets [", e->begin, ", ", e->end, "] overlap tensor '", *prev,
                 "' (which ends at ", pos, ")");
        if (e->begin > pos)
            fail("tensor '", *name, "': data_offsets [", e->begin, ", ", e->end, "] leave bytes [", pos, ", ", e->begin,
                 ") of the data section unused");
        pos = e->end;
        prev = name;
        order_.push_back(*name);
    }
    if (pos != data_size)
        fail("the data section has ", data_size, " bytes but the tensors cover only ", pos, " (", data_size - pos,
             " trailing bytes)");
}

DEPTHLAB_OUT_OF_LINE tensor_entry safetensors_file::parse_entry(const std::string& name, const nlohmann::json& v,
                                                               std::uint64_t data_size) const {
    if (!v.is_object()) fail("tensor '", name, "': header entry is a JSON ", v.type_name(), ", not an object");
    tensor_entry e;
    const auto dtype = v.find("dtype");
    if (dtype == v.end()) fail("tensor '", name, "': header entry has no 'dtype'");
    if (!dtype->is_string()) fail("tensor '", name, "': 'dtype' is not a string");
    e.dtype = dtype->get<std::string>();
    const std::size_t item = dtype_size(e.dtype);
    if (item == 0) fail("tensor '", name, "': unknown dtype '", e.dtype, "'");

    const auto shape = v.find("shape");
    if (shape == v.end()) fail("tensor '", name, "': header entry has no 'shape'");
    if (!shape->is_array()) fail("tensor '", name, "': 'shape' is not an array");
    if (shape->size() > static_cast<std::size_t>(Shape::max_rank))
        fail("tensor '", name, "': shape has rank ", shape->size(), ", depthlab supports at most ", Shape::max_rank);
    std::uint64_t bytes = item;
    bool overflow = false;
    for (const auto& d : *shape) {
        if (!d.is_number_unsigned() || d.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<index_t>::max()))
            fail("tensor '", name, "': shape ", shape->dump(), " has an extent that is not a non-negative integer");
        const auto x = d.get<std::uint64_t>();
        overflow = overflow || __builtin_mul_overflow(bytes, x, &bytes);
        e.shape.push_back(static_cast<index_t>(x));
    }
    if (overflow) fail("tensor '", name, "': shape ", e.shape, " is too large");

    const auto offsets = v.find("data_offsets");
    if (offsets == v.end()) fail("tensor '", name, "': header entry has no 'data_offsets'");
    if (!offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned())
        fail("tensor '", name, "': data_offsets ", offsets->dump(), " is not a pair of non-negative integers");
    e.begin = (*offsets)[0].get<std::uint64_t>();
    e.end = (*offsets)[1].get<std::uint64_t>();
    if (e.begin > e.end) fail("tensor '", name, "': data_offsets [", e.begin, ", ", e.end, "] end before they begin");
    if (e.end > data_size)
        fail("tensor '", name, "': data_offsets [", e.begin, ", ", e.end, "] run past the end of the data section (",
             data_size, " bytes; truncated file?)");
    if (e.end - e.begin != bytes)
        fail("tensor '", name, "': data_offsets [", e.begin, ", ", e.end, "] span ", e.end - e.begin, " bytes, but shape ",
             e.shape, " of ", e.dtype, " needs ", bytes);
    return e;
}
#endif  // DEPTHLAB_DEFINE_OUT_OF_LINE

}  // namespace depthlab::io
