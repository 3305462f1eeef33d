#pragma once
// What every depthlab fuzz harness shares: the readers under test take paths, so each input
// is written to a file of this process's own, and the depthlab::error they throw on bad
// input is the expected outcome (anything else — a crash, a sanitizer report, another
// exception type, a leak, a hang — is a finding).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <unistd.h>

namespace depthlab::fuzz {

/// A per-process scratch path (TMPDIR or /tmp) for file `tag`.
inline std::string scratch_path(const char* tag) {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/depthlab_fuzz_" + std::to_string(::getpid()) + "_" + tag;
}

/// Replaces the content of `path` with the bytes; aborts if the file cannot be written
/// (a broken environment, not a finding about the code under test).
inline void write_file(const std::string& path, std::string_view bytes) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) || std::fclose(f) != 0) {
        std::perror(path.c_str());
        std::abort();
    }
}

/// The input split at the first occurrence of `sep` (the whole input and "" if none).
inline std::pair<std::string_view, std::string_view> split_once(std::string_view in, std::string_view sep) {
    const std::size_t at = in.find(sep);
    if (at == std::string_view::npos) return {in, {}};
    return {in.substr(0, at), in.substr(at + sep.size())};
}

/// A finding that is not a crash: print it and abort, so libFuzzer saves the input.
[[noreturn]] inline void fail(const char* what) {
    std::fprintf(stderr, "depthlab fuzz: %s\n", what);
    std::abort();
}

}  // namespace depthlab::fuzz
