// I/O: safetensors reading and writing (round trips, byte layout, atomic writes, every
// corruption the reader must refuse, a file written by PyTorch), and model checkpoints
// (strict/non-strict parameter loading, training state with optimizer tensors and RNG).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <depthlab/io/checkpoint.hpp>
#include <depthlab/io/safetensors.hpp>
#include <depthlab/nn/module.hpp>
#include <depthlab/optim/adam.hpp>
#include <depthlab/train/progress.hpp>
#include "temp_dir.hpp"

using namespace depthlab;
using doctest::Contains;
namespace fs = std::filesystem;

namespace {
/// doctest::Contains for a std::string (it takes a doctest::String).
doctest::Contains has(const std::string& s) { return doctest::Contains(s.c_str()); }
}  // namespace

namespace {

struct temp_dir : depthlab_test::temp_dir {
    temp_dir() : depthlab_test::temp_dir("io") {}
};

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in.good());
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
}
std::string le64(std::uint64_t n) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
    return s;
}
std::uint64_t read_le64(const std::string& s) {
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(s[static_cast<std::size_t>(i)]);
    return n;
}
/// A safetensors file from a header text and data bytes (no padding added).
std::string raw_file(const std::string& header, const std::string& data) { return le64(header.size()) + header + data; }
template <class T>
std::string bytes_of(const std::vector<T>& v) {
    return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)};
}
template <class T>
std::uint64_t bits(T v) {
    std::uint64_t b = 0;
    std::memcpy(&b, &v, sizeof v);
    return b;
}

/// The message of the io_error that opening `path` throws ("" if none).
std::string open_error(const std::string& path) {
    try {
        io::safetensors_file f(path);
    } catch (const io_error& e) {
        return e.what();
    }
    return "";
}

struct Tiny : nn::Module<float> {
    Var<float> w, b;
    explicit Tiny(float base = 0) {
        std::vector<float> wv(6), bv(3);
        for (int i = 0; i < 6; ++i) wv[static_cast<std::size_t>(i)] = base + static_cast<float>(i);
        for (int i = 0; i < 3; ++i) bv[static_cast<std::size_t>(i)] = base - static_cast<float>(i);
        w = register_parameter("w", Tensor<float>::from({2, 3}, wv));
        b = register_parameter("b", Tensor<float>::from({3}, bv));
    }
};
/// Tiny plus a child module, for dotted names ("inner.w").
struct Outer : nn::Module<float> {
    Var<float> scale;
    Tiny& inner;
    explicit Outer(float base = 0) : inner(register_module("inner", std::make_unique<Tiny>(base))) {
        scale = register_parameter("scale", Tensor<float>::full({1}, base + 0.5f));
    }
};
/// Same names as Tiny, another shape for w.
struct TinyWide : nn::Module<float> {
    Var<float> w, b;
    TinyWide() {
        w = register_parameter("w", Tensor<float>::zeros({4, 3}));
        b = register_parameter("b", Tensor<float>::zeros({3}));
    }
};

}  // namespace

// ------------------------------------------------------------------------------------------
// Writing and reading
// ------------------------------------------------------------------------------------------

TEST_CASE("safetensors: round trip of F32, F64, I64 tensors and metadata") {
    temp_dir dir;
    const std::string path = dir.file("mixed.safetensors");
    const auto f32 = Tensor<float>::from({2, 3}, {1.5f, -2.f, 0.f, 3.25f, -0.f, 1e-30f});
    const auto f64 = Tensor<double>::from({3}, {0.1, -1e300, std::numeric_limits<double>::denorm_min()});
    const auto i64 = Tensor<std::int64_t>::from({2, 2}, {0, -1, std::numeric_limits<std::int64_t>::min(), std::int64_t{1} << 50});
    const auto scalar = Tensor<double>::full({}, 42.0);
    const auto empty = Tensor<float>::zeros({0, 4});
    // A transposed view: written as its logical row-major values.
    const auto base = Tensor<float>::from({2, 3}, {1, 2, 3, 4, 5, 6});
    const auto view = base.transpose(0, 1);
    io::save_safetensors(path,
                         {{"a.f32", f32}, {"b.f64", f64}, {"c.i64", i64}, {"d.scalar", scalar}, {"e.empty", empty}, {"f.view", view}},
                         {{"step", "12"}, {"note", "ünïcødé ✓"}, {"empty", ""}});

    io::safetensors_file f(path);
    CHECK(f.names() == std::vector<std::string>{"a.f32", "b.f64", "c.i64", "d.scalar", "e.empty", "f.view"});
    CHECK(f.metadata() == io::metadata_map{{"step", "12"}, {"note", "ünïcødé ✓"}, {"empty", ""}});
    CHECK(f.entry("a.f32").dtype == "F32");
    CHECK(f.entry("c.i64").dtype == "I64");
    CHECK(f.entry("b.f64").shape == Shape{3});
    CHECK(f.entry("d.scalar").shape == Shape{});
    CHECK(f.entry("e.empty").begin == f.entry("e.empty").end);

    CHECK(f.load<float>("a.f32").to_vector() == f32.to_vector());
    CHECK(bits(f.load<float>("a.f32").to_vector()[4]) == bits(-0.f));
    CHECK(f.load<double>("b.f64").to_vector() == f64.to_vector());
    CHECK(f.load<std::int64_t>("c.i64").to_vector() == i64.to_vector());
    CHECK(f.load<std::int64_t>("c.i64").shape() == Shape{2, 2});
    CHECK(f.load<double>("d.scalar").item() == 42.0);
    CHECK(f.load<float>("e.empty").shape() == Shape{0, 4});
    CHECK(f.load<float>("f.view").shape() == Shape{3, 2});
    CHECK(f.load<float>("f.view").to_vector() == std::vector<float>{1, 4, 2, 5, 3, 6});

    // F32 <-> F64 convert; nothing else does.
    CHECK(f.load<double>("a.f32").to_vector() == std::vector<double>{1.5, -2, 0, 3.25, -0.0, static_cast<double>(1e-30f)});
    CHECK(f.load<float>("b.f64").to_vector() == std::vector<float>{0.1f, -INFINITY, 0.f});
    CHECK_THROWS_WITH_AS((void)f.load<float>("c.i64"), Contains("tensor 'c.i64' is I64, cannot load it as F32"), io_error);
    CHECK_THROWS_WITH_AS((void)f.load<std::int64_t>("a.f32"), Contains("is F32, cannot load it as I64"), io_error);
    CHECK_THROWS_WITH_AS((void)f.entry("nope"), Contains("no tensor named 'nope'"), io_error);
    CHECK_THROWS_WITH_AS((void)f.load<float>("nope"), has(path), io_error);

    // The templated single-type overload, and no metadata: no __metadata__ key at all.
    const std::string p2 = dir.file("floats.safetensors");
    io::save_safetensors(p2, std::vector<std::pair<std::string, Tensor<float>>>{{"x", f32}});
    io::safetensors_file g(p2);
    CHECK(g.metadata().empty());
    CHECK(read_file(p2).find("__metadata__") == std::string::npos);
    CHECK(g.load<float>("x").to_vector() == f32.to_vector());

    // Other integer dtypes go through the same path.
    io::safetensors_writer w;
    w.add("u8", Tensor<std::uint8_t>::from({3}, {0, 128, 255}));
    w.add("i32", Tensor<std::int32_t>::from({2}, {-7, 1 << 30}));
    w.write(p2);
    io::safetensors_file h(p2);
    CHECK(h.entry("u8").dtype == "U8");
    CHECK(h.load<std::uint8_t>("u8").to_vector() == std::vector<std::uint8_t>{0, 128, 255});
    CHECK(h.load<std::int32_t>("i32").to_vector() == std::vector<std::int32_t>{-7, 1 << 30});
}

TEST_CASE("safetensors: writer refuses bad names and dtypes") {
    io::safetensors_writer w;
    w.add("x", Tensor<float>::zeros({2}));
    CHECK_THROWS_WITH_AS(w.add("x", Tensor<float>::zeros({2})), Contains("duplicate tensor name 'x'"), usage_error);
    CHECK_THROWS_WITH_AS(w.add("__metadata__", Tensor<float>::zeros({2})), Contains("reserved"), usage_error);
    CHECK_THROWS_WITH_AS(w.add("", Tensor<float>::zeros({2})), Contains("empty tensor name"), usage_error);
    CHECK_THROWS_WITH_AS(w.add("u", Tensor<float>()), Contains("'u' is undefined"), usage_error);
    CHECK_THROWS_WITH_AS(w.add_raw("y", "F33", Shape{1}, [](const io::byte_sink&) {}), Contains("unknown dtype 'F33'"),
                         usage_error);
    w.add_metadata("bad", std::string("\xff\xfe"));  // not UTF-8
    CHECK_THROWS_WITH_AS((void)w.header(), Contains("cannot encode the header"), usage_error);
}

TEST_CASE("safetensors: byte layout of a written file") {
    temp_dir dir;
    const std::string path = dir.file("layout.safetensors");
    const std::vector<float> a{1, 2, 3};
    const std::vector<double> b{-1.25, 7};
    const std::vector<std::int64_t> c{5};
    io::save_safetensors(path,
                         {{"a", Tensor<float>::from({3}, a)}, {"b", Tensor<double>::from({1, 2}, b)}, {"c", Tensor<std::int64_t>::from({}, c)},
                          {"z", Tensor<float>::zeros({0})}},
                         {{"k", "v"}});
    const std::string blob = read_file(path);
    REQUIRE(blob.size() >= 8);
    const std::uint64_t n = read_le64(blob);
    CHECK(n % 8 == 0);  // the header is padded so that the data starts 8-byte aligned
    REQUIRE(8 + n <= blob.size());
    const std::string header = blob.substr(8, n);
    CHECK(header.front() == '{');
    const std::size_t close = header.find_last_of('}');
    CHECK(close + 8 > n);  // at most 7 bytes of padding...
    CHECK(header.find_first_not_of(' ', close + 1) == std::string::npos);  // ...and only spaces
    const auto j = nlohmann::json::parse(header);
    CHECK(j["__metadata__"] == nlohmann::json{{"k", "v"}});
    CHECK(j.begin().key() == "__metadata__");  // written first, as the reference writer does
    CHECK(j["a"]["dtype"] == "F32");
    CHECK(j["a"]["shape"] == nlohmann::json::array({3}));
    CHECK(j["b"]["dtype"] == "F64");
    CHECK(j["b"]["shape"] == nlohmann::json::array({1, 2}));
    CHECK(j["c"]["dtype"] == "I64");
    CHECK(j["c"]["shape"] == nlohmann::json::array());
    // Offsets: contiguous from 0 in the order the tensors were given, covering the data.
    CHECK(j["a"]["data_offsets"] == nlohmann::json::array({0, 12}));
    CHECK(j["b"]["data_offsets"] == nlohmann::json::array({12, 28}));
    CHECK(j["c"]["data_offsets"] == nlohmann::json::array({28, 36}));
    CHECK(j["z"]["data_offsets"] == nlohmann::json::array({36, 36}));
    CHECK(blob.size() == 8 + n + 36);
    const std::string data = blob.substr(8 + n);
    CHECK(data.substr(0, 12) == bytes_of(a));
    CHECK(data.substr(12, 16) == bytes_of(b));
    CHECK(data.substr(28, 8) == bytes_of(c));
    // Byte-exact little-endian encoding of one value, independent of the host.
    CHECK(data.substr(28, 8) == std::string("\x05\0\0\0\0\0\0\0", 8));
}

TEST_CASE("safetensors: reads a file written by PyTorch (scripts/make_safetensors_fixture.py)") {
    const std::string path = std::string(DEPTHLAB_FIXTURE_DIR) + "/torch_written.safetensors";
    io::safetensors_file f(path);
    CHECK(f.metadata().at("format") == "pt");
    CHECK(f.metadata().at("unicode") == "π ≈ 3.14159 ✓");
    // Data order (the header's keys are sorted differently).
    CHECK(f.names() == std::vector<std::string>{"f32.matrix", "f64.cube", "i64.ids", "f32.special", "f64.scalar", "f32.empty"});

    const auto m = f.load<float>("f32.matrix");
    CHECK(m.shape() == Shape{2, 3});
    for (int i = 0; i < 6; ++i) CHECK(m.to_vector()[static_cast<std::size_t>(i)] == static_cast<float>((i - 2) * 0.1));

    const auto c = f.load<double>("f64.cube");
    CHECK(c.shape() == Shape{2, 2, 2});
    for (int i = 0; i < 8; ++i) CHECK(bits(c.to_vector()[static_cast<std::size_t>(i)]) == bits((i - 3) / 7.0));

    const auto ids = f.load<std::int64_t>("i64.ids");
    CHECK(ids.to_vector() == std::vector<std::int64_t>{0, -1, (std::int64_t{1} << 40) + 7, std::numeric_limits<std::int64_t>::min(),
                                                       std::numeric_limits<std::int64_t>::max()});

    const std::vector<float> s = f.load<float>("f32.special").to_vector();
    REQUIRE(s.size() == 7);
    CHECK(bits(s[0]) == bits(0.f));
    CHECK(bits(s[1]) == bits(-0.f));
    CHECK(s[2] == INFINITY);
    CHECK(s[3] == -INFINITY);
    CHECK(std::isnan(s[4]));
    CHECK(s[5] == std::numeric_limits<float>::denorm_min());
    CHECK(s[6] == std::numeric_limits<float>::max());

    CHECK(f.load<double>("f64.scalar").shape() == Shape{});
    CHECK(f.load<double>("f64.scalar").item() == 3.141592653589793);
    CHECK(f.load<float>("f32.empty").shape() == Shape{0, 3});
    // And what PyTorch wrote, depthlab writes back the same way.
    temp_dir dir;
    io::save_safetensors(dir.file("again.safetensors"), {{"m", io::any_tensor(m)}, {"ids", io::any_tensor(ids)}});
    io::safetensors_file g(dir.file("again.safetensors"));
    CHECK(g.read_bytes("m") == f.read_bytes("f32.matrix"));
    CHECK(g.read_bytes("ids") == f.read_bytes("i64.ids"));
}

// ------------------------------------------------------------------------------------------
// Atomic writes
// ------------------------------------------------------------------------------------------

TEST_CASE("safetensors: atomic write into a missing directory fails cleanly") {
    temp_dir dir;
    const std::string path = dir.file("no/such/dir/model.safetensors");
    CHECK_THROWS_WITH_AS(io::save_safetensors(path, {{"x", io::any_tensor(Tensor<float>::zeros({2}))}}), has(path), io_error);
    CHECK_THROWS_WITH_AS(io::save_safetensors(path, {{"x", io::any_tensor(Tensor<float>::zeros({2}))}}),
                         Contains("No such file or directory"), io_error);
    CHECK(dir.listing().empty());
}

TEST_CASE("safetensors: a write that fails midway leaves the existing file intact") {
    temp_dir dir;
    const std::string path = dir.file("model.safetensors");
    io::save_safetensors(path, {{"x", io::any_tensor(Tensor<float>::full({4}, 1.f))}}, {{"version", "1"}});
    const std::string before = read_file(path);

    SUBCASE("the producer throws after half the bytes") {
        io::safetensors_writer w;
        w.add("x", Tensor<float>::full({4}, 2.f));
        w.add_raw("y", "F32", Shape{64}, [](const io::byte_sink& put) {
            const std::vector<float> half(32, 3.f);
            put(half.data(), half.size() * sizeof(float));
            throw std::runtime_error("simulated disk failure");
        });
        CHECK_THROWS_WITH_AS(w.write(path), Contains("simulated disk failure"), io_error);
        CHECK_THROWS_WITH_AS(w.write(path), has(path), io_error);
    }
    SUBCASE("the producer gives too few bytes") {
        io::safetensors_writer w;
        w.add_raw("y", "F64", Shape{2, 2}, [](const io::byte_sink& put) { put("12345678", 8); });
        CHECK_THROWS_WITH_AS(w.write(path), Contains("tensor 'y': producer gave 8 bytes, shape (2, 2) F64 needs 32"), io_error);
    }
    SUBCASE("the producer gives too many bytes") {
        io::safetensors_writer w;
        w.add_raw("y", "I64", Shape{1}, [](const io::byte_sink& put) { put("0123456789abcdef", 16); });
        CHECK_THROWS_WITH_AS(w.write(path), Contains("tensor 'y': producer gave more than the 8 bytes"), io_error);
    }
    CHECK(read_file(path) == before);
    CHECK(dir.listing() == std::vector<std::string>{"model.safetensors"});  // no temporary file left
    CHECK(io::safetensors_file(path).metadata().at("version") == "1");
}

TEST_CASE("safetensors: rename failure removes the temporary file; overwrite replaces") {
    temp_dir dir;
    fs::create_directory(dir.path / "occupied.safetensors");  // a directory where the file should go
    const std::string blocked = dir.file("occupied.safetensors");
    CHECK_THROWS_WITH_AS(io::save_safetensors(blocked, {{"x", io::any_tensor(Tensor<float>::zeros({1}))}}), Contains("cannot rename"),
                         io_error);
    CHECK(dir.listing() == std::vector<std::string>{"occupied.safetensors"});
    CHECK_THROWS_WITH_AS(io::safetensors_file{blocked}, Contains("not a regular file"), io_error);

    const std::string path = dir.file("m.safetensors");
    io::save_safetensors(path, {{"x", io::any_tensor(Tensor<float>::full({2}, 1.f))}});
    io::safetensors_file old(path);  // an open reader keeps reading the old file
    io::save_safetensors(path, {{"x", io::any_tensor(Tensor<double>::full({3}, 2.0))}});
    CHECK(io::safetensors_file(path).load<double>("x").to_vector() == std::vector<double>(3, 2.0));
    CHECK(old.load<float>("x").to_vector() == std::vector<float>(2, 1.f));
    CHECK(dir.listing().size() == 2);
}

// ------------------------------------------------------------------------------------------
// Corrupt files
// ------------------------------------------------------------------------------------------

TEST_CASE("safetensors: truncated files are refused with the path and the reason") {
    temp_dir dir;
    const std::string good = dir.file("good.safetensors");
    io::save_safetensors(good, {{"weight", io::any_tensor(Tensor<float>::full({4, 4}, 1.f))}, {"bias", io::any_tensor(Tensor<double>::zeros({4}))}});
    const std::string blob = read_file(good);
    const std::uint64_t n = read_le64(blob);
    const std::string bad = dir.file("bad.safetensors");

    struct cut {
        std::size_t length;
        const char* reason;
    };
    const std::vector<cut> cuts = {
        {0, "file is 0 bytes, shorter than the 8-byte header length field"},
        {7, "file is 7 bytes"},
        {8, "exceeds the 0 bytes that follow the length field"},
        {12, "exceeds the 4 bytes"},
        {static_cast<std::size_t>(8 + n - 1), "exceeds the"},
        {static_cast<std::size_t>(8 + n), "run past the end of the data section (0 bytes"},   // header, no data
        {static_cast<std::size_t>(8 + n + 20), "run past the end of the data section (20 bytes"},
        {blob.size() - 1, "run past the end of the data section"},
    };
    for (const cut& c : cuts) {
        CAPTURE(c.length);
        write_file(bad, blob.substr(0, c.length));
        const std::string msg = open_error(bad);
        CHECK(msg.find(bad) != std::string::npos);
        CHECK_MESSAGE(msg.find(c.reason) != std::string::npos, msg);
    }
    // Every truncation, not only those above, is caught on open.
    for (std::size_t len = 0; len < blob.size(); ++len) {
        write_file(bad, blob.substr(0, len));
        CHECK_MESSAGE(!open_error(bad).empty(), "truncated at ", len);
    }
    // Trailing bytes after the last tensor are refused too.
    write_file(bad, blob + "junk");
    CHECK_THROWS_WITH_AS(io::safetensors_file{bad}, Contains("4 trailing bytes"), io_error);
    // A missing file.
    CHECK_THROWS_WITH_AS(io::safetensors_file{dir.file("missing.safetensors")}, Contains("missing.safetensors: cannot open"), io_error);
}

TEST_CASE("safetensors: a wrong header length is refused") {
    temp_dir dir;
    const std::string good = dir.file("good.safetensors");
    io::save_safetensors(good, {{"w", io::any_tensor(Tensor<float>::full({8}, 1.f))}});
    const std::string blob = read_file(good);
    const std::uint64_t n = read_le64(blob);
    const std::string bad = dir.file("bad.safetensors");

    write_file(bad, le64(std::uint64_t{1} << 62) + blob.substr(8));  // huge
    CHECK_THROWS_WITH_AS(io::safetensors_file{bad}, Contains("header length 4611686018427387904 exceeds"), io_error);
    write_file(bad, le64(n - 8) + blob.substr(8));  // too short: the JSON is cut
    CHECK_THROWS_WITH_AS(io::safetensors_file{bad}, Contains("invalid JSON header"), io_error);
    write_file(bad, le64(n + 8) + blob.substr(8));  // too long: the data is read as JSON
    CHECK_THROWS_WITH_AS(io::safetensors_file{bad}, Contains("invalid JSON header"), io_error);
    std::string flipped = blob;
    flipped[7] = '\x80';  // the top byte: a big-endian reading of a small length
    write_file(bad, flipped);
    CHECK_THROWS_WITH_AS(io::safetensors_file{bad}, has(bad + ": header length"), io_error);
}

TEST_CASE("safetensors: malformed headers are refused, naming the tensor") {
    temp_dir dir;
    const std::string bad = dir.file("bad.safetensors");
    const std::string d16(16, '\0');  // 16 data bytes: four F32 or two F64
    struct bad_case {
        std::string header, data, reason;
    };
    const std::vector<bad_case> cases = {
        {"not json at all", d16, "invalid JSON header"},
        {R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]})", d16, "invalid JSON header"},  // unclosed
        {R"([1, 2, 3])", "", "invalid header: a JSON array, not an object"},
        {R"({"w": [1]})", d16, "tensor 'w': header entry is a JSON array, not an object"},
        {R"({"w": {"shape": [4], "data_offsets": [0, 16]}})", d16, "tensor 'w': header entry has no 'dtype'"},
        {R"({"w": {"dtype": "F32", "data_offsets": [0, 16]}})", d16, "tensor 'w': header entry has no 'shape'"},
        {R"({"w": {"dtype": "F32", "shape": [4]}})", d16, "tensor 'w': header entry has no 'data_offsets'"},
        {R"({"w": {"dtype": 32, "shape": [4], "data_offsets": [0, 16]}})", d16, "tensor 'w': 'dtype' is not a string"},
        {R"({"w": {"dtype": "F33", "shape": [4], "data_offsets": [0, 16]}})", d16, "tensor 'w': unknown dtype 'F33'"},
        {R"({"w": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}})", d16, "tensor 'w': 'shape' is not an array"},
        {R"({"w": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}})", d16, "tensor 'w': shape [-4] has an extent that is not"},
        {R"({"w": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 16]}})", d16, "has an extent that is not a non-negative integer"},
        {R"({"w": {"dtype": "F32", "shape": [1,1,1,1,1,1,1,1,4], "data_offsets": [0, 16]}})", d16, "shape has rank 9"},
        {R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]}})", d16, "is too large"},
        {R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0]}})", d16, "tensor 'w': data_offsets [0] is not a pair"},
        {R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [-1, 15]}})", d16, "is not a pair of non-negative integers"},
        {R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]}})", d16, "tensor 'w': data_offsets [16, 0] end before"},
        {R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 32]}})", d16,
         "tensor 'w': data_offsets [0, 32] run past the end of the data section (16 bytes"},
        {R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}})", d16,
         "tensor 'w': data_offsets [0, 16] span 16 bytes, but shape (3,) of F32 needs 12"},
        {R"({"w": {"dtype": "F64", "shape": [4], "data_offsets": [0, 16]}})", d16, "shape (4,) of F64 needs 32"},
        {R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
         d16, "tensor 'b': data_offsets [8, 16] overlap tensor 'a'"},
        {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [12, 16]}})",
         d16, "tensor 'b': data_offsets [12, 16] leave bytes [8, 12) of the data section unused"},
        {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", d16, "the data section has 16 bytes but the tensors cover only 8"},
        {R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, "w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
         d16, "duplicate key 'w'"},
        {R"({"__metadata__": {"step": 3}, "w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", d16,
         "metadata 'step' is a JSON number, not a string"},
        {std::string(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})") + std::string(3, '\0'), d16,
         "NUL byte at offset"},  // NUL padding (nlohmann alone would stop there and accept)
        {R"({"__metadata__": ["x"], "w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", d16,
         "'__metadata__' is a JSON array, not an object"},
    };
    for (const bad_case& c : cases) {
        CAPTURE(c.header);
        write_file(bad, raw_file(c.header, c.data));
        const std::string msg = open_error(bad);
        CHECK(msg.find("checkpoint " + bad + ": ") == 0);
        CHECK_MESSAGE(msg.find(c.reason) != std::string::npos, msg);
    }
    // The same layouts, well-formed, are accepted (so the cases above fail for their reason).
    write_file(bad, raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})", d16));
    CHECK(open_error(bad).empty());
    // Dtypes that depthlab cannot load still open; the others load.
    write_file(bad, raw_file(R"({"h": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}, "f": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})", d16));
    io::safetensors_file f(bad);
    CHECK(f.load<float>("f").to_vector() == std::vector<float>{0, 0});
    CHECK_THROWS_WITH_AS((void)f.load<float>("h"), Contains("tensor 'h' is BF16, cannot load it as F32"), io_error);
}

TEST_CASE("safetensors: load_into checks the shape and writes in place") {
    temp_dir dir;
    const std::string path = dir.file("model.safetensors");
    io::save_safetensors(path, {{"encoder.0.q_proj.weight", io::any_tensor(Tensor<float>::full({256, 256}, 0.5f))},
                                {"b", io::any_tensor(Tensor<double>::from({2}, {1.0, 2.0}))}});
    io::safetensors_file f(path);
    auto dst = Tensor<float>::zeros({128, 256});
    CHECK_THROWS_WITH_AS(f.load_into("encoder.0.q_proj.weight", dst),
                         has("checkpoint " + path + ": tensor 'encoder.0.q_proj.weight' has shape (256, 256), model expects (128, 256)"),
                         io_error);
    CHECK(dst.to_vector() == std::vector<float>(128 * 256, 0.f));
    auto small = Tensor<float>::zeros({2});
    const float* storage = small.data();
    f.load_into("b", small);  // F64 into float
    CHECK(small.data() == storage);
    CHECK(small.to_vector() == std::vector<float>{1.f, 2.f});
    // A strided destination (a column of a bigger tensor).
    auto big = Tensor<float>::zeros({2, 3});
    auto col = big.select(1, 1);
    f.load_into("b", col);
    CHECK(big.to_vector() == std::vector<float>{0, 1, 0, 0, 2, 0});
}

// ------------------------------------------------------------------------------------------
// Model checkpoints
// ------------------------------------------------------------------------------------------

TEST_CASE("checkpoint: save_parameters / load_parameters round trip, in place") {
    temp_dir dir;
    const std::string path = dir.file("tiny.safetensors");
    Outer src(10.f);
    io::save_parameters(path, src, {{"arch", "outer"}});
    {
        io::safetensors_file f(path);
        CHECK(f.names() == std::vector<std::string>{"scale", "inner.w", "inner.b"});
        CHECK(f.metadata().at("arch") == "outer");
    }

    Outer dst(0.f);
    Var<float> w_handle = dst.inner.w;
    const float* w_storage = dst.inner.w.value().data();
    const io::load_report rep = io::load_parameters(path, dst);
    CHECK(rep.missing.empty());
    CHECK(rep.unexpected.empty());
    CHECK(dst.inner.w.value().data() == w_storage);  // same storage: copied in place
    CHECK(w_handle.value().to_vector() == src.inner.w.value().to_vector());
    CHECK(dst.inner.b.value().to_vector() == src.inner.b.value().to_vector());
    CHECK(dst.scale.value().to_vector() == std::vector<float>{10.5f});

    // A double model reads the float file (F32 -> F64).
    struct TinyD : nn::Module<double> {
        Var<double> w;
        TinyD() { w = register_parameter("w", Tensor<double>::zeros({2, 3})); }
    } dd;
    const io::load_report r2 = io::load_parameters(path, dd, /*strict=*/false);
    CHECK(r2.missing == std::vector<std::string>{"w"});  // the file has inner.w, not w
    Tiny t(3.f);
    io::save_parameters(dir.file("t.safetensors"), t);
    io::load_parameters(dir.file("t.safetensors"), dd, false);
    CHECK(dd.w.value().to_vector() == std::vector<double>{3, 4, 5, 6, 7, 8});
}

TEST_CASE("checkpoint: strict loading lists missing, unexpected and mis-shaped tensors") {
    temp_dir dir;
    const std::string path = dir.file("tiny.safetensors");
    Tiny src(1.f);
    io::save_parameters(path, src);

    SUBCASE("missing and unexpected") {
        Outer model(0.f);  // expects scale, inner.w, inner.b; the file has w, b
        const auto before = model.inner.w.value().to_vector();
        CHECK_THROWS_WITH_AS(io::load_parameters(path, model), has("checkpoint " + path + ": does not match the model"), io_error);
        CHECK_THROWS_WITH_AS(io::load_parameters(path, model), Contains("missing 3: 'scale', 'inner.w', 'inner.b'"), io_error);
        CHECK_THROWS_WITH_AS(io::load_parameters(path, model), Contains("unexpected 2: 'w', 'b'"), io_error);
        CHECK(model.inner.w.value().to_vector() == before);
        const io::load_report rep = io::load_parameters(path, model, /*strict=*/false);
        CHECK(rep.missing == std::vector<std::string>{"scale", "inner.w", "inner.b"});
        CHECK(rep.unexpected == std::vector<std::string>{"w", "b"});
        CHECK(model.inner.w.value().to_vector() == before);
    }
    SUBCASE("one missing") {
        io::save_safetensors(path, {{"w", io::any_tensor(src.w.value())}});
        Tiny model;
        CHECK_THROWS_WITH_AS(io::load_parameters(path, model), Contains("missing 1: 'b'"), io_error);
        const io::load_report rep = io::load_parameters(path, model, false);
        CHECK(rep.missing == std::vector<std::string>{"b"});
        CHECK(model.w.value().to_vector() == src.w.value().to_vector());  // the present one is loaded
        CHECK(model.b.value().to_vector() == Tiny().b.value().to_vector());
    }
    SUBCASE("one unexpected") {
        io::save_safetensors(path, {{"w", io::any_tensor(src.w.value())}, {"b", io::any_tensor(src.b.value())},
                                    {"extra.bias", io::any_tensor(Tensor<float>::zeros({1}))}});
        Tiny model;
        CHECK_THROWS_WITH_AS(io::load_parameters(path, model), Contains("unexpected 1: 'extra.bias'"), io_error);
        CHECK(io::load_parameters(path, model, false).unexpected == std::vector<std::string>{"extra.bias"});
        CHECK(model.w.value().to_vector() == src.w.value().to_vector());
    }
    SUBCASE("mis-shaped: refused even when not strict, model untouched") {
        TinyWide model;
        CHECK_THROWS_WITH_AS(io::load_parameters(path, model), has("checkpoint " + path + ": tensor 'w' has shape (2, 3), model expects (4, 3)"),
                             io_error);
        CHECK_THROWS_AS(io::load_parameters(path, model, false), io_error);
        CHECK(model.b.value().to_vector() == std::vector<float>(3, 0.f));  // not half-loaded
    }
    SUBCASE("wrong dtype") {
        io::save_safetensors(path, {{"w", io::any_tensor(Tensor<std::int64_t>::zeros({2, 3}))}, {"b", io::any_tensor(src.b.value())}});
        Tiny model;
        CHECK_THROWS_WITH_AS(io::load_parameters(path, model), Contains("tensor 'w' is I64, model parameters are F32"), io_error);
    }
}

TEST_CASE("checkpoint: training state with optimizer tensors, step and RNG") {
    temp_dir dir;
    const std::string path = dir.file("checkpoint.safetensors");
    Tiny model(2.f);
    Generator gen(0xdeadbeefcafef00dULL);
    (void)Tensor<float>::randn({5}, gen);
    (void)gen.next_u32();

    io::training_state<float> st;
    st.tensors.emplace_back("optim.adam.m.w", Tensor<float>::full({2, 3}, 0.25f));
    st.tensors.emplace_back("optim.adam.v.w", Tensor<float>::full({2, 3}, 0.5f));
    st.set_u64("step", 18446744073709551615ULL);  // exact, all 64 bits
    st.set_generator("rng", gen);
    st.set_double("lr", 3e-4);
    st.set_double("best_loss", 0.1 + 0.2);
    st.metadata["config"] = R"({"depth": 4})";
    io::save_checkpoint(path, model, st);
    CHECK(io::safetensors_file(path).contains("__state__.optim.adam.m.w"));

    Tiny restored(0.f);
    const io::training_state<float> back = io::load_checkpoint(path, restored);
    CHECK(restored.w.value().to_vector() == model.w.value().to_vector());
    CHECK(restored.b.value().to_vector() == model.b.value().to_vector());
    REQUIRE(back.tensors.size() == 2);
    CHECK(back.tensors[0].first == "optim.adam.m.w");
    CHECK(back.tensor("optim.adam.v.w").to_vector() == std::vector<float>(6, 0.5f));
    CHECK(back.has_tensor("optim.adam.m.w"));
    CHECK_THROWS_WITH_AS((void)back.tensor("optim.sgd.momentum"), Contains("no tensor 'optim.sgd.momentum'"), io_error);
    CHECK(back.get_u64("step") == 18446744073709551615ULL);
    CHECK(back.get_double("lr") == 3e-4);
    CHECK(back.get_double("best_loss") == 0.1 + 0.2);
    CHECK(back.get("config") == R"({"depth": 4})");

    Generator again(1);
    back.restore_generator("rng", again);
    CHECK(again.seed() == gen.seed());
    CHECK(again.offset() == gen.offset());
    CHECK(again.next_u32() == gen.next_u32());  // the stream continues where it stopped
    CHECK(Tensor<float>::randn({4}, again).to_vector() == Tensor<float>::randn({4}, gen).to_vector());

    // Bad metadata is reported, not misread.
    io::training_state<float> odd;
    odd.metadata = {{"step", "-1"}, {"big", "18446744073709551616"}, {"sp", " 1"}, {"x", "1e"}};
    CHECK_THROWS_WITH_AS((void)odd.get_u64("step"), Contains("'step' = '-1' is not an unsigned 64-bit integer"), io_error);
    CHECK_THROWS_AS((void)odd.get_u64("big"), io_error);
    CHECK_THROWS_AS((void)odd.get_u64("sp"), io_error);
    CHECK_THROWS_AS((void)odd.get_double("x"), io_error);
    CHECK_THROWS_WITH_AS((void)odd.get_u64("missing"), Contains("no metadata 'missing'"), io_error);

    // The checkpoint is also a plain parameter file: strict load_parameters ignores the state.
    Tiny plain(0.f);
    const io::load_report rep = io::load_parameters(path, plain);
    CHECK(rep.unexpected.empty());
    CHECK(plain.w.value().to_vector() == model.w.value().to_vector());

    // A checkpoint of another model fails before anything is modified.
    TinyWide wide;
    CHECK_THROWS_WITH_AS((void)io::load_checkpoint(path, wide), Contains("tensor 'w' has shape (2, 3), model expects (4, 3)"), io_error);
    CHECK(wide.w.value().to_vector() == std::vector<float>(12, 0.f));
}

TEST_CASE("checkpoint: a run resumed from a checkpoint continues bit for bit (Adam, RNG, step)") {
    temp_dir dir;
    const std::string path = dir.file("checkpoint.safetensors");
    // Gradients drawn from the generator: the "data" of the run depends on the RNG state.
    const auto train = [](Tiny& model, optim::Adam<float>& opt, Generator& gen, std::uint64_t& step, int n) {
        for (int i = 0; i < n; ++i, ++step) {
            model.w.grad() = Tensor<float>::randn({2, 3}, gen);
            model.b.grad() = Tensor<float>::uniform({3}, gen, -1, 1);
            opt.step();
            opt.zero_grad();
        }
    };
    Tiny run(1.f);
    optim::Adam<float> opt(run.named_parameters(), {.lr = 0.05});
    Generator gen(1234);
    std::uint64_t step = 0;
    train(run, opt, gen, step, 3);

    io::training_state<float> st;
    st.add_section("optim", opt.state_tensors(), opt.state_scalars());
    st.set_u64("step", step);
    st.set_generator("rng", gen);
    CHECK_THROWS_WITH_AS(st.add_section("optim", opt.state_tensors()), Contains("added twice"), usage_error);
    io::save_checkpoint(path, run, st);
    CHECK(io::safetensors_file(path).contains("__state__.optim.adam.m.w"));
    CHECK(io::safetensors_file(path).metadata().at("optim.optimizer") == "adam");

    train(run, opt, gen, step, 4);  // the uninterrupted run

    Tiny resumed(-5.f);
    optim::Adam<float> opt2(resumed.named_parameters(), {.lr = 0.05});
    Generator gen2(99);
    const io::training_state<float> back = io::load_checkpoint(path, resumed);
    opt2.load_state(back.section_tensors("optim"), back.section_metadata("optim"));
    back.restore_generator("rng", gen2);
    std::uint64_t step2 = back.get_u64("step");
    CHECK(step2 == 3);
    train(resumed, opt2, gen2, step2, 4);

    CHECK(step2 == step);
    CHECK(resumed.w.value().to_vector() == run.w.value().to_vector());  // exact, not approximate
    CHECK(resumed.b.value().to_vector() == run.b.value().to_vector());
    CHECK(opt2.step_count() == opt.step_count());
    CHECK(gen2.offset() == gen.offset());
}

// ------------------------------------------------------------------------------------------
// What loading must refuse and saving must never write (issue 9)
// ------------------------------------------------------------------------------------------

TEST_CASE("safetensors: the reader refuses what the writer refuses: empty names, NUL bytes") {
    temp_dir dir;
    const std::string bad = dir.file("bad.safetensors");
    const std::string d16(16, '\0');
    write_file(bad, raw_file(R"({"": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", d16));
    CHECK(open_error(bad).find("'' is an empty tensor name") != std::string::npos);
    write_file(bad, raw_file(R"({"a\u0000b": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", d16));
    CHECK(open_error(bad).find("'a\\x00b' is a tensor name with a NUL byte") != std::string::npos);
    CHECK(open_error(bad).find(bad) != std::string::npos);  // the path is named
    io::safetensors_writer w;
    CHECK_THROWS_WITH_AS(w.add(std::string("a\0b", 3), Tensor<float>::zeros({2})), Contains("NUL byte"), usage_error);
}

TEST_CASE("checkpoint: non-finite parameters or state are refused at load, naming file and tensor") {
    temp_dir dir;
    const std::string path = dir.file("nan.safetensors");
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    // written raw: save_parameters refuses to write such a file
    const auto write_with = [&](const std::string& bad_name, const std::vector<float>& bad_values) {
        io::safetensors_writer w;
        const std::vector<float> wv = bad_name == "w" ? bad_values : std::vector<float>(6, 1.f);
        const std::vector<float> bv = bad_name == "b" ? bad_values : std::vector<float>(3, 1.f);
        w.add("w", Tensor<float>::from({2, 3}, wv));
        w.add("b", Tensor<float>::from({3}, bv));
        if (bad_name.starts_with("__state__")) w.add(bad_name, Tensor<float>::from({2, 3}, bad_values));
        w.write(path);
    };
    Tiny model(3.f);
    const auto w0 = model.w.value().to_vector();
    write_with("w", {1, 2, nan, 4, inf, 6});
    CHECK_THROWS_WITH_AS((void)io::load_parameters(path, model),
                         has("checkpoint " + path + ": tensor 'w' holds 2 non-finite values (the first is nan at flat index 2 of 6)"),
                         io_error);
    CHECK(model.w.value().to_vector() == w0);  // untouched
    write_with("b", {1, -inf, 3});
    CHECK_THROWS_WITH_AS((void)io::load_checkpoint(path, model), Contains("tensor 'b' holds 1 non-finite value"), io_error);
    write_with("__state__.optim.adam.v.w", {1, 2, 3, 4, 5, nan});
    CHECK_THROWS_WITH_AS((void)io::load_checkpoint(path, model), Contains("tensor '__state__.optim.adam.v.w' holds 1 non-finite"),
                         io_error);
    CHECK(model.w.value().to_vector() == w0);
}

TEST_CASE("optimizer state: NaN moments or negative second moments are refused, nothing changes") {
    Tiny model(1.f);
    optim::Adam<float> adam(model.named_parameters(), {.lr = 0.01});
    model.w.grad() = Tensor<float>::full({2, 3}, 0.5f);
    model.b.grad() = Tensor<float>::full({3}, 0.5f);
    adam.step();
    const auto tensors = adam.state_tensors();
    const auto scalars = adam.state_scalars();
    const auto with = [&](const std::string& key, std::vector<float> values) {
        optim::Adam<float>::state_tensor_list out;
        for (const auto& [k, t] : tensors) out.emplace_back(k, k == key ? Tensor<float>::from(t.shape(), values) : t.clone());
        return out;
    };
    optim::Adam<float> fresh(model.named_parameters(), {.lr = 0.01});
    CHECK_THROWS_WITH_AS(fresh.load_state(with("adam.v.w", {1, 1, -1e-3f, 1, 1, 1}), scalars, "ck.safetensors"),
                         Contains("adam.load_state (ck.safetensors): tensor 'adam.v.w' holds 1 invalid value (non-finite or negative "
                                  "second moments); the first is -0.001 at flat index 2 of 6"),
                         io_error);
    CHECK_THROWS_WITH_AS(fresh.load_state(with("adam.m.b", {0, std::numeric_limits<float>::quiet_NaN(), 0}), scalars),
                         Contains("tensor 'adam.m.b' holds 1 invalid value (non-finite)"), io_error);
    CHECK(fresh.step_count() == 0);
    CHECK(fresh.state_tensors().empty());
    // a negative first moment is fine (it is a signed average)
    fresh.load_state(with("adam.m.w", {-1, -2, -3, -4, -5, -6}), scalars);
    CHECK(fresh.step_count() == 1);
}

TEST_CASE("checkpoint: saving non-finite parameters or state throws and keeps the last good file") {
    temp_dir dir;
    const std::string path = dir.file("checkpoint.safetensors");
    Tiny model(1.f);
    io::training_state<float> st;
    st.tensors.emplace_back("optim.adam.v.w", Tensor<float>::full({2, 3}, 0.5f));
    io::save_checkpoint(path, model, st);
    const std::string good = read_file(path);

    model.w.value().data()[4] = std::numeric_limits<float>::infinity();
    CHECK_THROWS_WITH_AS(io::save_checkpoint(path, model, st),
                         has("save " + path + ": tensor 'w' holds 1 non-finite value (the first is inf at flat index 4 of 6); nothing was written"),
                         numeric_error);
    CHECK_THROWS_AS(io::save_parameters(path, model), numeric_error);
    model.w.value().data()[4] = 0.f;
    st.tensors[0].second.data()[0] = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_WITH_AS(io::save_checkpoint(path, model, st), Contains("tensor '__state__.optim.adam.v.w' holds 1 non-finite"),
                         numeric_error);
    CHECK(read_file(path) == good);
    CHECK(dir.listing() == std::vector<std::string>{"checkpoint.safetensors"});  // no temporary left
}

TEST_CASE("atomic files: a killed writer's temporary is removed by the next write; a live one is kept") {
    temp_dir dir;
    const std::string path = dir.file("checkpoint.safetensors");
    // a killed run leaves its temporary behind, unlocked (the lock died with the process)
    write_file(path + ".tmp.4242.0", "half a checkpoint");
    // a writer still at work holds its temporary locked (here: this process, another descriptor)
    write_file(path + ".tmp.4343.7", "being written");
    const int fd = ::open((path + ".tmp.4343.7").c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX) == 0);
    // look-alikes are never touched
    write_file(path + ".tmp.notes", "mine");
    write_file(dir.file("other.safetensors.tmp.4242.0"), "another target's");

    Tiny model(1.f);
    io::save_parameters(path, model);
    CHECK(dir.listing() == std::vector<std::string>{"checkpoint.safetensors", "checkpoint.safetensors.tmp.4343.7",
                                                    "checkpoint.safetensors.tmp.notes", "other.safetensors.tmp.4242.0"});
    ::close(fd);  // the writer is gone: its file is stale now
    CHECK(io::remove_stale_temporaries(path) == 1);
    CHECK(dir.listing() == std::vector<std::string>{"checkpoint.safetensors", "checkpoint.safetensors.tmp.notes",
                                                    "other.safetensors.tmp.4242.0"});
    io::write_file_atomically(dir.file("notes.txt"), "text");
    CHECK(read_file(dir.file("notes.txt")) == "text");
}

TEST_CASE("metrics.jsonl: a resumed run cuts the log back to its checkpoint's step") {
    temp_dir dir;
    const std::string path = dir.file("metrics.jsonl");
    // a run logged steps 10..40, was checkpointed at 20 and killed mid-line after 40
    write_file(path, "{\"step\": 10, \"loss\": 3}\n{\"step\": 20, \"loss\": 2}\n{\"step\": 30, \"loss\": 1.5}\n"
                     "{\"step\": 40, \"loss\": 1.2}\n{\"step\": 5");
    {
        train::progress_meter meter(60, 20, path);  // resumed at step 20
        meter.report(30, {{"loss", 1.4}}, stderr);
    }
    std::vector<std::int64_t> steps;
    std::istringstream in(read_file(path));
    for (std::string line; std::getline(in, line);) steps.push_back(nlohmann::json::parse(line)["step"].get<std::int64_t>());
    CHECK(steps == std::vector<std::int64_t>{10, 20, 30});
    CHECK(dir.listing() == std::vector<std::string>{"metrics.jsonl"});
    CHECK(train::truncate_jsonl(path, 30) == 0);  // nothing to drop: the file is left alone
    CHECK(train::truncate_jsonl(dir.file("missing.jsonl"), 0) == 0);
    CHECK(train::truncate_jsonl(path, 0) == 3);  // a fresh run starts an empty log
    CHECK(read_file(path).empty());
}
