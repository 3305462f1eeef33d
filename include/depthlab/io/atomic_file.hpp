#pragma once
// Atomic file writes: a file is either its old content or its complete new content, never
// a mix, whatever happens during the write (an exception, a full disk, kill -9, power loss).
//
// The bytes go to a temporary file next to the target, `<path>.tmp.<pid>.<n>`, created
// exclusively and held under an exclusive flock(2) while it is written; it is flushed,
// fsync'ed and renamed over the target, and the directory is fsync'ed. On failure the
// temporary is removed and io_error names the path. A flock dies with its process, so a
// temporary that can be locked belongs to a writer that was killed before its rename: the
// next write of the same path removes it (temporaries of live writers stay locked and are
// left alone, even those of other threads of this process).
//
//   io::write_file_atomically("runs/x/report.html", html);
//   io::write_atomically(path, "save_safetensors", [&](const io::byte_sink& put) { put(p, n); ... });
//
// POSIX only (open/flock/fsync/rename).
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "depthlab/core/error.hpp"

namespace depthlab::io {

/// Receives bytes (any number of calls).
using byte_sink = std::function<void(const void* data, std::size_t bytes)>;

namespace detail {
inline std::atomic<std::uint64_t>& temp_counter() {
    static std::atomic<std::uint64_t> n{0};
    return n;
}
inline std::string errno_text(int err) { return std::strerror(err); }
inline std::string temp_prefix(const std::string& path) { return path + ".tmp."; }
inline std::string directory_of(const std::string& path) {
    const std::size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

/// A temporary being written: the stream, and a second descriptor on the same open file
/// (dup shares it, hence the lock) that keeps the lock held after the stream is closed,
/// until the rename is done.
struct locked_temporary {
    std::string name;
    std::FILE* file = nullptr;
    int lock_fd = -1;
    locked_temporary() = default;
    locked_temporary(const locked_temporary&) = delete;
    locked_temporary& operator=(const locked_temporary&) = delete;
    ~locked_temporary() {
        close_file();
        release();
    }
    /// Closes the stream (if still open); returns fclose's result.
    int close_file() { return file ? std::fclose(std::exchange(file, nullptr)) : 0; }
    /// Drops the lock (after the rename, or with discard).
    void release() {
        if (lock_fd >= 0) ::close(std::exchange(lock_fd, -1));
    }
    /// Closes everything and removes the file (after a failure).
    void discard() {
        close_file();
        if (!name.empty()) ::unlink(name.c_str());
        release();
    }
};

/// Creates and locks a new temporary file for `path` (op names the caller in errors).
inline void create_locked_temporary(const std::string& path, const char* op, locked_temporary& t) {
    for (int attempt = 0;; ++attempt) {
        t.name = temp_prefix(path) + std::to_string(::getpid()) + "." + std::to_string(temp_counter()++);
        const int fd = ::open(t.name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);  // never reuse someone's file
        if (fd < 0)
            throw io_error(depthlab::detail::cat(op, " ", path, ": cannot create temporary file ", t.name, ": ", errno_text(errno)));
        // A cleaner may have taken the file between open and flock (it found it unlocked):
        // then the name no longer leads to this file, and a fresh one is made.
        struct ::stat mine {}, named {};
        const bool ok = ::flock(fd, LOCK_EX) == 0 && ::fstat(fd, &mine) == 0 && ::stat(t.name.c_str(), &named) == 0 &&
                        mine.st_ino == named.st_ino && mine.st_dev == named.st_dev;
        if (ok) {
            t.lock_fd = ::dup(fd);
            if (t.lock_fd >= 0) {
                t.file = ::fdopen(fd, "wb");
                if (t.file != nullptr) return;
                t.release();
            }
            ::unlink(t.name.c_str());
        }
        const int err = errno;
        ::close(fd);
        if (attempt == 8)
            throw io_error(depthlab::detail::cat(op, " ", path, ": cannot lock temporary file ", t.name, ": ", errno_text(err)));
    }
}

/// Makes a rename durable (best effort: some file systems refuse fsync on a directory).
inline void sync_directory(const std::string& path) {
    const int fd = ::open(directory_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)::fsync(fd);
        ::close(fd);
    }
}
}  // namespace detail

/// Removes the temporaries of `path` left by writers that died (see the top of this file)
/// and returns how many. Best effort: whatever cannot be listed, opened or locked is left.
/// Called by every atomic write; public so that tools can clean a folder explicitly.
inline std::size_t remove_stale_temporaries(const std::string& path) {
    const std::string dir = detail::directory_of(path);
    const std::size_t slash = path.find_last_of('/');
    const std::string prefix = detail::temp_prefix(slash == std::string::npos ? path : path.substr(slash + 1));
    const auto digits = [](std::string_view v) { return !v.empty() && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }); };
    std::vector<std::string> candidates;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (const ::dirent* e = ::readdir(d)) {
            const std::string_view name = e->d_name;
            if (!name.starts_with(prefix)) continue;
            // the rest must be <pid>.<n>: never touch a user's file that merely looks alike
            const std::string_view rest = name.substr(prefix.size());
            const std::size_t dot = rest.find('.');
            if (dot != std::string_view::npos && digits(rest.substr(0, dot)) && digits(rest.substr(dot + 1)))
                candidates.emplace_back(dir + "/" + std::string(name));
        }
        ::closedir(d);
    }
    std::size_t removed = 0;
    for (const std::string& c : candidates) {
        const int fd = ::open(c.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) continue;
        struct ::stat locked {}, named {};
        if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::fstat(fd, &locked) == 0 && S_ISREG(locked.st_mode) &&
            ::stat(c.c_str(), &named) == 0 && locked.st_ino == named.st_ino && locked.st_dev == named.st_dev &&
            ::unlink(c.c_str()) == 0)
            ++removed;
        ::close(fd);
    }
    return removed;
}

/// Writes `path` atomically with the bytes `produce(put)` gives. Throws io_error
/// "<op> <path>: <why>" after removing the temporary; `path` is then untouched. An
/// exception from `produce` aborts the write the same way (its message becomes the why).
template <class Produce>
void write_atomically(const std::string& path, const char* op, Produce&& produce) {
    remove_stale_temporaries(path);
    detail::locked_temporary t;
    detail::create_locked_temporary(path, op, t);
    struct failure {
        std::string why;
    };
    std::string why;
    try {
        const byte_sink put = [&](const void* data, std::size_t n) {
            if (n != 0 && std::fwrite(data, 1, n, t.file) != n)
                throw failure{depthlab::detail::cat("write failed: ", detail::errno_text(errno))};
        };
        produce(put);
        if (std::fflush(t.file) != 0) throw failure{depthlab::detail::cat("flush failed: ", detail::errno_text(errno))};
        if (::fsync(::fileno(t.file)) != 0) throw failure{depthlab::detail::cat("fsync failed: ", detail::errno_text(errno))};
        if (t.close_file() != 0) throw failure{depthlab::detail::cat("close failed: ", detail::errno_text(errno))};
        if (std::rename(t.name.c_str(), path.c_str()) != 0)
            throw failure{depthlab::detail::cat("cannot rename ", t.name, " over it: ", detail::errno_text(errno))};
    } catch (const failure& e) {
        why = e.why;
    } catch (const std::exception& e) {
        why = depthlab::detail::cat("write aborted: ", e.what());
    } catch (...) {
        t.discard();
        throw;
    }
    if (!why.empty()) {
        t.discard();
        throw io_error(depthlab::detail::cat(op, " ", path, ": ", why));
    }
    t.release();
    detail::sync_directory(path);
}

/// Writes a whole file atomically (reports, CSVs, metrics rewrites).
inline void write_file_atomically(const std::string& path, std::string_view content, const char* op = "write") {
    write_atomically(path, op, [&](const byte_sink& put) { put(content.data(), content.size()); });
}

}  // namespace depthlab::io
