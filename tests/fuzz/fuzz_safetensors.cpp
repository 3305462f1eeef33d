// libFuzzer harness: the safetensors reader on arbitrary bytes. Opening validates the whole
// header; then every tensor is read, and loaded as its element type where depthlab has one.
// A file that opens must also be writable again with the same names (the reader accepts
// nothing the writer refuses).
#include <depthlab/io/safetensors.hpp>

#include "fuzz_input.hpp"

using namespace depthlab;

namespace {
template <class T>
void load_as(const io::safetensors_file& f, const std::string& name) {
    const Tensor<T> t = f.load<T>(name);
    if (t.shape() != f.entry(name).shape) fuzz::fail("loaded shape differs from the header's");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const std::string path = fuzz::scratch_path("safetensors");
    fuzz::write_file(path, {reinterpret_cast<const char*>(data), size});
    try {
        const io::safetensors_file f(path);
        io::safetensors_writer again;
        for (const std::string& name : f.names()) {
            const io::tensor_entry& e = f.entry(name);
            const std::vector<unsigned char> bytes = f.read_bytes(name);
            if (bytes.size() != e.end - e.begin) fuzz::fail("read_bytes size differs from the data offsets");
            if (e.dtype == "F32") load_as<float>(f, name);
            else if (e.dtype == "F64") load_as<double>(f, name);
            else if (e.dtype == "I64") load_as<std::int64_t>(f, name);
            else if (e.dtype == "I32") load_as<std::int32_t>(f, name);
            again.add_raw(name, e.dtype, e.shape, [](const io::byte_sink&) {});  // names and shapes only: throws if refused
        }
        (void)again.header();
    } catch (const depthlab::error&) {
        // a clear rejection: the expected outcome for most inputs
    }
    return 0;
}
