// The emulated CUDA device: runtime, fibers for device threads, cuBLAS reference GEMMs
// (depthlab_cuda_emulation.hpp says what it promises). x86-64 Linux only: a device thread is
// a fiber switched by the few instructions below, and device memory is guarded by mprotect.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "cublasLt.h"
#include "cublas_v2.h"
#include "cuda_runtime.h"

#if !defined(__x86_64__) || !defined(__linux__)
#error "the emulated CUDA device runs on x86-64 Linux only"
#endif

thread_local uint3 threadIdx, blockIdx;
thread_local dim3 blockDim, gridDim;

namespace depthlab_emulation {
namespace {

// ============================================================ errors, counters, faults

thread_local cudaError_t last_error = cudaSuccess;
std::atomic<int> failing_allocations{0};
std::atomic<bool> failing_launch{false}, faulting_kernel{false};
cudaError_t sticky = cudaSuccess;  // a kernel's fault: every later synchronisation and allocation returns it
struct illegal_address {};  // thrown by a kernel made to fault
std::mutex device_mutex;  // one flush at a time: the device memory is open while it runs
stats totals;

bool take_failure() {
    int n = failing_allocations.load();
    while (n > 0 && !failing_allocations.compare_exchange_weak(n, n - 1)) {
    }
    return n > 0;
}
cudaError_t fail(cudaError_t e) {
    last_error = e;
    return e;
}

// ============================================================ device memory

struct allocation {
    std::size_t bytes;   // as asked for: what kernels and cuBLAS may reach
    std::size_t mapped;  // whole pages
};
std::map<std::uintptr_t, allocation>& allocations() {  // by start address
    static std::map<std::uintptr_t, allocation> m;
    return m;
}
/// Device memory: page runs of one reserved address range (never readable outside the
/// device's work; freed runs are returned to the system and stay inaccessible, so a kernel
/// that touches freed memory faults). One range lets protect_all open and close adjacent
/// allocations with one call each. (device_mutex guards it.)
struct device_arena {
    static constexpr std::size_t reserved = std::size_t{64} << 30;
    char* base = nullptr;
    std::size_t top = 0;                          // bytes handed out at least once
    std::map<std::size_t, std::size_t> holes;     // offset -> bytes, freed runs below top
    void* allocate(std::size_t bytes) {
        if (!base) {
            void* r = mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (r == MAP_FAILED) return nullptr;
            base = static_cast<char*>(r);
        }
        for (auto it = holes.begin(); it != holes.end(); ++it)  // first fit
            if (it->second >= bytes) {
                const std::size_t at = it->first, rest = it->second - bytes;
                holes.erase(it);
                if (rest) holes[at + bytes] = rest;
                return base + at;
            }
        if (reserved - top < bytes) return nullptr;
        top += bytes;
        return base + top - bytes;
    }
    void release(void* p, std::size_t bytes) {
        (void)madvise(p, bytes, MADV_DONTNEED);  // (the pages' contents go; the range stays reserved)
        std::size_t at = static_cast<std::size_t>(static_cast<char*>(p) - base);
        if (auto next = holes.find(at + bytes); next != holes.end()) {
            bytes += next->second;
            holes.erase(next);
        }
        if (auto it = holes.lower_bound(at); it != holes.begin() && std::prev(it)->first + std::prev(it)->second == at) {
            --it;
            at = it->first;
            bytes += it->second;
            holes.erase(it);
        }
        if (at + bytes == top) top = at;
        else holes[at] = bytes;
    }
    [[nodiscard]] bool contains(std::uintptr_t a) const {
        return base && a >= reinterpret_cast<std::uintptr_t>(base) && a < reinterpret_cast<std::uintptr_t>(base) + reserved;
    }
};
device_arena& arena() {
    static device_arena a;
    return a;
}
std::map<void*, std::size_t>& pinned() {
    static std::map<void*, std::size_t> m;
    return m;
}
std::size_t page_round(std::size_t bytes) {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return std::max<std::size_t>(page, (bytes + page - 1) / page * page);
}
/// The allocation holding [p, p + bytes) within the bytes asked for, or nullptr.
const std::pair<const std::uintptr_t, allocation>* find_allocation(const void* p, std::size_t bytes = 1) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    auto& m = allocations();
    auto it = m.upper_bound(a);
    if (it == m.begin()) return nullptr;
    --it;
    if (a < it->first || a + bytes > it->first + it->second.bytes) return nullptr;
    return &*it;
}
bool is_device(const void* p, std::size_t bytes = 1) { return find_allocation(p, bytes) != nullptr; }

/// Device memory is readable only while the device works (flush): a host read between
/// synchronisations faults, and this handler says what was read.
struct sigaction previous_segv {};
void on_segv(int sig, siginfo_t* info, void* ctx) {
    const auto a = reinterpret_cast<std::uintptr_t>(info->si_addr);
    char msg[320];
    int n = 0;
    for (const auto& [start, al] : allocations())
        if (a >= start && a < start + al.mapped) {
            n = std::snprintf(msg, sizeof msg,
                              "depthlab CUDA emulation: the host touched emulated device memory at %p (an allocation of %zu bytes) "
                              "outside the device's work: device memory must be downloaded (after a synchronisation) to be read\n",
                              info->si_addr, al.bytes);
            break;
        }
    if (n == 0 && arena().contains(a))
        n = std::snprintf(msg, sizeof msg,
                          "depthlab CUDA emulation: %p is emulated device memory that is not allocated (freed, or past the end of an "
                          "allocation): a use after cudaFree or an out-of-bounds index\n",
                          info->si_addr);
    if (n > 0) (void)!write(2, msg, static_cast<std::size_t>(n));
    sigaction(SIGSEGV, &previous_segv, nullptr);  // the fault repeats under the previous handler
    (void)sig;
    (void)ctx;
}
void install_handler() {
    static std::once_flag once;
    std::call_once(once, [] { install_fault_handler(); });
}
void protect_all(int prot) {
    // (adjacent allocations as one run: each mprotect call costs a TLB shootdown)
    std::uintptr_t run = 0, end = 0;
    for (const auto& [start, al] : allocations()) {
        if (start != end) {
            if (end) mprotect(reinterpret_cast<void*>(run), end - run, prot);
            run = start;
        }
        end = start + al.mapped;
    }
    if (end) mprotect(reinterpret_cast<void*>(run), end - run, prot);
}

/// DEPTHLAB_CUDA_EMULATION_PROFILE=1: at exit, the kernels (and cuBLAS calls) that took the
/// emulator's time, with their launches and threads — what to make cheaper when a test or an
/// example is slow here. (Host time of the emulation, not a GPU's.)
struct kernel_profile {
    bool on = std::getenv("DEPTHLAB_CUDA_EMULATION_PROFILE") != nullptr;
    struct entry {
        std::int64_t launches = 0, threads = 0;
        double seconds = 0;
    };
    std::map<std::string, entry> by_name;
    void note(const std::string& name, std::int64_t threads, std::chrono::steady_clock::time_point start) {
        entry& e = by_name[name];
        ++e.launches;
        e.threads += threads;
        e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    ~kernel_profile() {
        if (!on) return;
        std::vector<std::pair<std::string, entry>> v(by_name.begin(), by_name.end());
        std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
        std::fprintf(stderr, "depthlab CUDA emulation profile: %-40s %10s %14s %10s\n", "kernel", "launches", "threads", "seconds");
        for (const auto& [name, e] : v)
            std::fprintf(stderr, "depthlab CUDA emulation profile: %-40s %10lld %14lld %10.3f\n", name.c_str(), static_cast<long long>(e.launches),
                         static_cast<long long>(e.threads), e.seconds);
    }
};
kernel_profile& profile() {
    static kernel_profile p;
    return p;
}
/// Runs a piece of device work, timed into the profile when it is on.
template <class F>
void profiled(const std::string& name, std::int64_t threads, F&& work) {
    const auto start = std::chrono::steady_clock::now();
    work();
    if (profile().on) profile().note(name, threads, start);
}

// ============================================================ fibers: device threads

extern "C" void depthlab_emulation_switch(void** save_sp, void* load_sp);
// Saves the callee-saved registers on the current stack, stores the stack pointer in *save_sp,
// loads load_sp and restores the same from there. (MXCSR and the x87 control word are not
// switched: device code never changes them, so every fiber runs with the host thread's.)
asm(R"(
.text
.globl depthlab_emulation_switch
.type depthlab_emulation_switch,@function
depthlab_emulation_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size depthlab_emulation_switch, .-depthlab_emulation_switch
.section .note.GNU-stack,"",@progbits
.text
)");

enum class fiber_state { runnable, at_block_barrier, at_warp_barrier, done };
struct fiber {
    void* sp = nullptr;      // nullptr until the thread first runs
    char* stack = nullptr;  // its top
    fiber_state state = fiber_state::runnable;
    unsigned tid = 0;
    uint3 index;
    std::uint64_t shuffle[2] = {0, 0};  // the values of the last two shuffles (see warp_shuffle_down)
    unsigned shuffles = 0;
};
constexpr std::size_t stack_bytes = std::size_t{192} << 10;
/// Stacks' tops are staggered by 64 bytes each (up to 64 KiB): tops 192 KiB apart would all map
/// to the same L1 and L2 cache sets, and a block of 256 threads switching at a barrier would
/// miss the cache on every switch.
constexpr std::size_t stack_colours = 1024, colour_bytes = 64;

struct block_runner {
    const std::function<void()>* body = nullptr;
    std::vector<fiber> fibers;
    fiber* current = nullptr;
    void* scheduler_sp = nullptr;
    std::string error;  // a thread's exception
    std::vector<char*> stacks, idle;  // every stack's top; those no started, unfinished thread holds
    /// A stack for a thread about to start: a finished thread's (so a block without barriers
    /// runs every thread on one stack, warm in cache), or a new one.
    char* take_stack() {
        if (!idle.empty()) {
            char* s = idle.back();
            idle.pop_back();
            return s;
        }
        void* s = mmap(nullptr, stack_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (s == MAP_FAILED) throw std::bad_alloc();
        mprotect(s, 4096, PROT_NONE);  // a guard page below each stack
        stacks.push_back(static_cast<char*>(s) + stack_bytes - stacks.size() % stack_colours * colour_bytes);
        return stacks.back();
    }
};
thread_local block_runner* runner = nullptr;

[[noreturn]] void fiber_main() {
    block_runner& r = *runner;
    try {
        (*r.body)();
    } catch (const std::exception& e) {
        if (r.error.empty()) r.error = e.what();
    } catch (...) {
        if (r.error.empty()) r.error = "an exception";
    }
    r.current->state = fiber_state::done;
    depthlab_emulation_switch(&r.current->sp, r.scheduler_sp);
    std::abort();  // (a finished fiber is never resumed)
}

void* initial_stack(char* stack_top) {
    auto top = reinterpret_cast<std::uintptr_t>(stack_top) & ~std::uintptr_t{15};
    auto* slot = reinterpret_cast<std::uint64_t*>(top);
    slot[-1] = 0;                                              // the "return address" of fiber_main
    slot[-2] = reinterpret_cast<std::uint64_t>(&fiber_main);   // where the switch returns to
    for (int i = 3; i <= 8; ++i) slot[-i] = 0;                 // rbp rbx r12 r13 r14 r15
    return &slot[-8];
}

void wait_here(fiber_state s) {
    block_runner& r = *runner;
    r.current->state = s;
    depthlab_emulation_switch(&r.current->sp, r.scheduler_sp);
}

/// Releases the threads waiting at a barrier that every live thread of its group reached.
/// Returns false when a barrier waits for threads that exited (an error in CUDA).
bool release_barriers(block_runner& r, std::string& why) {
    const auto n = static_cast<unsigned>(r.fibers.size());
    bool any_block = false, all_block = true;
    unsigned exited = 0;
    for (const fiber& f : r.fibers) {
        any_block |= f.state == fiber_state::at_block_barrier;
        all_block &= f.state == fiber_state::at_block_barrier;
        exited += f.state == fiber_state::done;
    }
    if (any_block) {
        if (!all_block) {
            why = "__syncthreads() reached by " + std::to_string(n - exited) + " of " + std::to_string(n) +
                  " threads (the others exited or wait at a warp barrier)";
            return false;
        }
        for (fiber& f : r.fibers) f.state = fiber_state::runnable;
        return true;
    }
    for (unsigned w0 = 0; w0 < n; w0 += 32) {
        const unsigned w1 = std::min(n, w0 + 32);
        unsigned waiting = 0, done = 0;
        for (unsigned t = w0; t < w1; ++t) {
            waiting += r.fibers[t].state == fiber_state::at_warp_barrier;
            done += r.fibers[t].state == fiber_state::done;
        }
        if (waiting == 0) continue;
        if (waiting + done != w1 - w0 || done > 0) {
            why = "a warp shuffle reached by " + std::to_string(waiting) + " of " + std::to_string(w1 - w0) + " lanes of warp " +
                  std::to_string(w0 / 32);
            return false;
        }
        for (unsigned t = w0; t < w1; ++t) r.fibers[t].state = fiber_state::runnable;
    }
    return true;
}

/// Runs every block of a kernel, each as blockDim fibers, on this host thread.
void run_kernel(const char* name, dim3_value grid, dim3_value block, const std::function<void()>& body) {
    // (never destroyed: a thread's other thread_local destructors — a cuBLAS handle's, a
    // cache's cudaFree — may still run queued kernels on it as the thread or process ends)
    thread_local block_runner& r = *new block_runner;
    runner = &r;
    r.body = &body;
    const unsigned n = block.x * block.y * block.z;
    r.fibers.assign(n, fiber{});
    gridDim = dim3(grid.x, grid.y, grid.z);
    blockDim = dim3(block.x, block.y, block.z);
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                blockIdx = uint3{bx, by, bz};
                r.idle = r.stacks;
                for (unsigned t = 0; t < n; ++t) {
                    fiber& f = r.fibers[t];
                    f.state = fiber_state::runnable;
                    f.shuffles = 0;
                    f.tid = t;
                    f.index = uint3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                    f.sp = nullptr;
                }
                totals.fibers += n;
                for (;;) {
                    bool ran = false;
                    for (unsigned t = n; t-- > 0;) {  // reverse order: a missing barrier shows
                        fiber& f = r.fibers[t];
                        if (f.state != fiber_state::runnable) continue;
                        r.current = &f;
                        threadIdx = f.index;
                        if (!f.sp) {
                            f.stack = r.take_stack();
                            f.sp = initial_stack(f.stack);
                        }
                        depthlab_emulation_switch(&r.scheduler_sp, f.sp);
                        if (f.state == fiber_state::done) r.idle.push_back(f.stack);
                        ran = true;
                    }
                    if (!r.error.empty()) throw std::runtime_error(std::string("kernel ") + name + ": " + r.error);
                    std::string why;
                    if (!release_barriers(r, why))
                        throw std::runtime_error(std::string("kernel ") + name + ", block (" + std::to_string(bx) + "," + std::to_string(by) + "," +
                                                 std::to_string(bz) + "): " + why);
                    const bool finished = std::all_of(r.fibers.begin(), r.fibers.end(), [](const fiber& f) { return f.state == fiber_state::done; });
                    if (finished) break;
                    if (!ran && !finished) throw std::runtime_error(std::string("kernel ") + name + ": no thread can make progress");
                }
            }
    runner = nullptr;
}

// ============================================================ streams and events

struct work {
    std::function<void()> run;
    std::string name;
};
}  // namespace
}  // namespace depthlab_emulation

struct CUstream_st {
    std::vector<depthlab_emulation::work> pending;
    std::uint64_t queued = 0, done = 0;
};
struct CUevent_st {
    CUstream_st* stream = nullptr;
    std::uint64_t at = 0;     // the stream's work count when recorded
    bool reported_pending = false;
};
struct cublasLtContext {};
struct cublasLtMatmulDescOpaque_t {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    std::int32_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
    std::uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    const void* bias = nullptr;  // (BGRADB: written)
    void* aux = nullptr;
    std::int64_t aux_ld = 0;
};
struct cublasLtMatrixLayoutOpaque_t {
    cudaDataType type;
    std::uint64_t rows, cols;
    std::int64_t ld;
};
struct cublasContext {
    cudaStream_t stream = nullptr;
    void* workspace = nullptr;
    std::size_t workspace_bytes = 0;
    cublasMath_t mode = CUBLAS_DEFAULT_MATH;
};

namespace depthlab_emulation {
namespace {
CUstream_st& legacy_stream() {
    static CUstream_st s;
    return s;
}
CUstream_st& resolve(cudaStream_t s) { return s ? *s : legacy_stream(); }
/// The streams alive besides the legacy one, guarded by streams_mutex, which also keeps a
/// stream alive while flush_all runs its work (taken before device_mutex, never after).
std::mutex streams_mutex;
std::set<CUstream_st*>& created_streams() {
    static std::set<CUstream_st*> s;
    return s;
}

void enqueue(cudaStream_t s, std::string name, std::function<void()> run) {
    std::lock_guard<std::mutex> lock(device_mutex);
    CUstream_st& st = resolve(s);
    st.pending.push_back({std::move(run), std::move(name)});
    ++st.queued;
}
/// Runs the stream's queued work (all of it) with the device memory open.
cudaError_t flush(CUstream_st& st) {
    std::lock_guard<std::mutex> lock(device_mutex);
    if (sticky != cudaSuccess) {
        st.done += st.pending.size();
        st.pending.clear();
        return fail(sticky);
    }
    if (st.pending.empty()) return cudaSuccess;
    protect_all(PROT_READ | PROT_WRITE);
    cudaError_t result = cudaSuccess;
    std::vector<work> todo;
    todo.swap(st.pending);
    for (work& w : todo) {
        if (sticky != cudaSuccess) {  // (the work after a fault does not run)
            ++st.done;
            continue;
        }
        try {
            w.run();
        } catch (const illegal_address&) {
            std::fprintf(stderr, "depthlab CUDA emulation: %s: an illegal address (injected fault)\n", w.name.c_str());
            sticky = result = cudaErrorIllegalAddress;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "depthlab CUDA emulation: %s failed: %s\n", w.name.c_str(), e.what());
            result = cudaErrorLaunchFailure;
        }
        ++st.done;
    }
    protect_all(PROT_NONE);
    return result == cudaSuccess ? cudaSuccess : fail(result);
}
cudaError_t synchronize(CUstream_st& st) {
    ++totals.synchronizations;
    return flush(st);
}
/// Runs the queued work of every stream: what cudaDeviceSynchronize and cudaFree wait for.
cudaError_t flush_all() {
    std::lock_guard<std::mutex> lock(streams_mutex);
    cudaError_t result = flush(legacy_stream());
    for (CUstream_st* st : created_streams())
        if (const cudaError_t e = flush(*st); result == cudaSuccess) result = e;
    return result;
}

// ============================================================ cuBLAS reference GEMM

/// The shape of one column-major product C (m x n) = a op(A) (m x k) op(B) (k x n) + b C.
struct gemm_shape {
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldc;
    /// cuBLAS's documented argument checks.
    [[nodiscard]] bool valid(int batch) const {
        return m >= 0 && n >= 0 && k >= 0 && batch >= 0 && (ta == CUBLAS_OP_N || ta == CUBLAS_OP_T) && (tb == CUBLAS_OP_N || tb == CUBLAS_OP_T) &&
               lda >= std::max(1, ta == CUBLAS_OP_N ? m : k) && ldb >= std::max(1, tb == CUBLAS_OP_N ? k : n) && ldc >= std::max(1, m);
    }
    /// Elements one matrix of each operand reaches (0 for A and B when k = 0).
    [[nodiscard]] long long reach_a() const { return k ? reach(lda, ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m) : 0; }
    [[nodiscard]] long long reach_b() const { return k ? reach(ldb, tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k) : 0; }
    [[nodiscard]] long long reach_c() const { return reach(ldc, m, n); }
    static long long reach(int ld, int rows, int cols) { return static_cast<long long>(cols - 1) * ld + rows; }
};

/// What a GEMM call checks before any work: the handle and cuBLAS's documented argument
/// rules; a valid call is counted. `nothing` is set when there is nothing to compute.
cublasStatus_t admit(cublasHandle_t h, const gemm_shape& g, int batch, const char* name, bool& nothing) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!g.valid(batch)) {
        std::fprintf(stderr, "depthlab CUDA emulation: %s: invalid value (m=%d n=%d k=%d lda=%d ldb=%d ldc=%d batch=%d)\n", name, g.m, g.n, g.k,
                     g.lda, g.ldb, g.ldc, batch);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    ++totals.gemms;
    nothing = g.m == 0 || g.n == 0 || batch == 0;
    return CUBLAS_STATUS_SUCCESS;
}

/// An operand's start and the elements it reaches: on a GPU a wrong leading dimension or
/// stride reads out of bounds (or faults); here an operand outside one allocation fails.
struct operand {
    const void* p;
    long long elements;
    const char* what;
};
template <class T>
std::optional<operand> outside_allocations(std::initializer_list<operand> operands) {
    for (const operand& o : operands)
        if (o.elements > 0 && !is_device(o.p, static_cast<std::size_t>(o.elements) * sizeof(T))) return o;
    return std::nullopt;
}

/// One matrix: op(A) packed column by column in double (ap: scratch), then each column of C
/// accumulated; every element sums its k products in order l = 0, 1, ... (a reference,
/// accumulated in double), its columns shared among the host's threads.
inline double widen(float v) { return v; }
inline double widen(double v) { return v; }
inline double widen(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class In, class T>
void reference_gemm(const gemm_shape& g, T a, const In* A, const In* B, T b, T* C, std::vector<double>& ap, const T* bias = nullptr) {
    const int m = g.m, n = g.n, k = g.k;
    ap.resize(static_cast<std::size_t>(m) * k);
    for (int l = 0; l < k; ++l)
        for (int i = 0; i < m; ++i)
            ap[static_cast<std::size_t>(l) * m + i] = widen(g.ta == CUBLAS_OP_N ? A[i + static_cast<long long>(l) * g.lda] : A[l + static_cast<long long>(i) * g.lda]);
    const double* apd = ap.data();
#pragma omp parallel for schedule(static)
    for (int j = 0; j < n; ++j) {
        std::vector<double> acc(static_cast<std::size_t>(m), 0.0);
        for (int l = 0; l < k; ++l) {
            const double y = widen(g.tb == CUBLAS_OP_N ? B[l + static_cast<long long>(j) * g.ldb] : B[j + static_cast<long long>(l) * g.ldb]);
            const double* a_col = apd + static_cast<std::size_t>(l) * m;
            for (int i = 0; i < m; ++i) acc[i] += a_col[i] * y;
        }
        for (int i = 0; i < m; ++i) {
            T& c = C[i + static_cast<long long>(j) * g.ldc];
            c = static_cast<T>(static_cast<double>(a) * acc[i] + (b == T(0) ? 0.0 : static_cast<double>(b) * static_cast<double>(c)) +
                               (bias ? static_cast<double>(bias[i]) : 0.0));
        }
    }
}

template <class In, class T>
cublasStatus_t gemm_strided_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* alpha,
                                    const In* A, int lda, long long sA, const In* B, int ldb, long long sB, const T* beta, T* C, int ldc,
                                    long long sC, int batch, const char* name) {
    const gemm_shape g{ta, tb, m, n, k, lda, ldb, ldc};
    bool nothing = false;
    if (const cublasStatus_t st = admit(h, g, batch, name, nothing); st != CUBLAS_STATUS_SUCCESS || nothing) return st;
    const T a = *alpha, b = *beta;  // host scalars (the default pointer mode), read at the call
    // each operand's last matrix, checked at the call
    const auto last = [batch](long long stride, long long one) { return one ? static_cast<long long>(batch - 1) * stride + one : 0; };
    auto o = outside_allocations<In>({{A, last(sA, g.reach_a()), "A"}, {B, last(sB, g.reach_b()), "B"}});
    if (!o) o = outside_allocations<T>({{C, last(sC, g.reach_c()), "C"}});
    if (o) {
        std::fprintf(stderr, "depthlab CUDA emulation: %s: operand %s (%p, %lld elements reached by m=%d n=%d k=%d ld/strides/batch %d) is "
                             "not inside one device allocation\n", name, o->what, o->p, o->elements, m, n, k, batch);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    enqueue(h->stream, name, [=] {
        profiled(name, static_cast<std::int64_t>(m) * n * batch, [&] {  // (threads: elements of C)
            std::vector<double> ap;
            for (int q = 0; q < batch; ++q) reference_gemm(g, a, A + q * sA, B + q * sB, b, C + q * sC, ap);
        });
    });
    return CUBLAS_STATUS_SUCCESS;
}

/// The pointer-array form: the arrays are device memory, read when the work runs; each
/// matrix they name must lie in one allocation, or the work fails naming the matrix.
template <class In, class T>
cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* alpha,
                            const In* const* A, int lda, const In* const* B, int ldb, const T* beta, T* const* C, int ldc, int batch,
                            const char* name) {
    const gemm_shape g{ta, tb, m, n, k, lda, ldb, ldc};
    bool nothing = false;
    if (const cublasStatus_t st = admit(h, g, batch, name, nothing); st != CUBLAS_STATUS_SUCCESS || nothing) return st;
    const long long entries = batch;
    if (const auto o = outside_allocations<const void*>({{A, entries, "A"}, {B, entries, "B"}, {C, entries, "C"}})) {
        std::fprintf(stderr, "depthlab CUDA emulation: %s: the pointer array of %s (%p, %d entries) is not inside one device allocation\n", name,
                     o->what, o->p, batch);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    const T a = *alpha, b = *beta;
    enqueue(h->stream, name, [=] {
        profiled(name, static_cast<std::int64_t>(m) * n * batch, [&] {
            std::vector<double> ap;
            for (int q = 0; q < batch; ++q) {
                auto o = outside_allocations<In>({{A[q], g.reach_a(), "A"}, {B[q], g.reach_b(), "B"}});
                if (!o) o = outside_allocations<T>({{C[q], g.reach_c(), "C"}});
                if (o)
                    throw std::runtime_error("matrix " + std::to_string(q) + " of operand " + o->what + " (" + std::to_string(o->elements) +
                                             " elements reached by m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                                             ") is not inside one device allocation");
                reference_gemm(g, a, A[q], B[q], b, C[q], ap);
            }
        });
    });
    return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

stats& counters() { return totals; }
void install_fault_handler() {
    struct sigaction sa {};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous_segv);
}
void reset_counters() { totals = stats{}; }
void fail_next_allocations(int count) { failing_allocations = count; }
void fail_next_launch() { failing_launch = true; }
void fault_next_kernel() { faulting_kernel = true; }
void clear_sticky_error() {
    std::lock_guard<std::mutex> lock(device_mutex);
    sticky = cudaSuccess;
    last_error = cudaSuccess;
}

void launch(const char* kernel, dim3_value grid, dim3_value block, std::size_t shared_bytes, void* stream, std::function<void()> body) {
    const unsigned long long threads = static_cast<unsigned long long>(block.x) * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 || block.z > 64 || grid.y > 65535 || grid.z > 65535 ||
        shared_bytes > 48 * 1024) {
        fail(cudaErrorInvalidConfiguration);
        return;
    }
    if (failing_launch.exchange(false)) {
        fail(cudaErrorLaunchFailure);
        return;
    }
    ++totals.kernels;
    const bool faults = faulting_kernel.exchange(false);
    enqueue(static_cast<cudaStream_t>(stream), kernel, [name = std::string(kernel), grid, block, body = std::move(body), faults] {
        if (faults) throw illegal_address{};
        profiled(name, static_cast<std::int64_t>(grid.x) * grid.y * grid.z * block.x * block.y * block.z,
                 [&] { run_kernel(name.c_str(), grid, block, body); });
    });
}
void block_barrier() {
    if (!runner) throw std::runtime_error("__syncthreads outside a kernel");
    wait_here(fiber_state::at_block_barrier);
}
std::uint64_t warp_shuffle_down(std::uint64_t value, unsigned delta) {
    if (!runner) throw std::runtime_error("__shfl_down_sync outside a kernel");
    // One barrier per shuffle: the values alternate between two slots, and a lane can only
    // overwrite a slot (two shuffles later) after the barrier of the shuffle in between, which
    // every lane reaches only after reading it.
    block_runner& r = *runner;
    fiber& me = *r.current;
    const unsigned slot = me.shuffles++ % 2;
    me.shuffle[slot] = value;
    wait_here(fiber_state::at_warp_barrier);  // every lane has published its value
    const unsigned lane = me.tid % 32, source = me.tid + delta;
    return lane + delta < 32 && source < r.fibers.size() ? r.fibers[source].shuffle[slot] : value;
}

}  // namespace depthlab_emulation

using namespace depthlab_emulation;

// ============================================================ the runtime API

const char* cudaGetErrorName(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
        case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
        case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
        case cudaErrorNotReady: return "cudaErrorNotReady";
        case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
        case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    }
    return "cudaErrorUnknown";
}
const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInvalidConfiguration: return "invalid configuration argument";
        case cudaErrorInvalidDevicePointer: return "invalid device pointer";
        case cudaErrorInvalidResourceHandle: return "invalid resource handle";
        case cudaErrorNotReady: return "device not ready";
        case cudaErrorLaunchFailure: return "unspecified launch failure";
        case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    }
    return "unknown error";
}
cudaError_t cudaGetLastError() {
    const cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError() { return last_error; }

cudaError_t cudaGetDeviceCount(int* count) {
    if (!count) return fail(cudaErrorInvalidValue);
    *count = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : fail(cudaErrorInvalidValue); }
cudaError_t cudaGetDevice(int* device) {
    if (!device) return fail(cudaErrorInvalidValue);
    *device = 0;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
    if (!p || device != 0) return fail(cudaErrorInvalidValue);
    *p = cudaDeviceProp{};
    std::snprintf(p->name, sizeof p->name, "%s", "depthlab emulated CUDA device (the CPU)");
    p->totalGlobalMem = std::size_t{16} << 30;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
    ++totals.synchronizations;
    return flush_all();
}

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) {
    if (!ptr) return fail(cudaErrorInvalidValue);
    if (sticky != cudaSuccess) return fail(sticky);
    if (take_failure()) return fail(cudaErrorMemoryAllocation);
    install_handler();
    const std::size_t mapped = page_round(bytes);
    std::lock_guard<std::mutex> lock(device_mutex);
    void* p = arena().allocate(mapped);
    if (!p) return fail(cudaErrorMemoryAllocation);
    allocations()[reinterpret_cast<std::uintptr_t>(p)] = {bytes, mapped};
    *ptr = p;
    return cudaSuccess;
}
cudaError_t cudaFree(void* ptr) {
    if (!ptr) return cudaSuccess;
    // CUDA's cudaFree waits for the device's queued work, which may still use the memory
    // (a kernel queued before the free runs before it, as on a GPU).
    const cudaError_t pending = flush_all();
    std::lock_guard<std::mutex> lock(device_mutex);
    auto& m = allocations();
    const auto it = m.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == m.end()) return fail(cudaErrorInvalidDevicePointer);
    arena().release(ptr, it->second.mapped);
    m.erase(it);
    return pending;
}
cudaError_t cudaHostAlloc(void** ptr, std::size_t bytes, unsigned) {
    if (!ptr) return fail(cudaErrorInvalidValue);
    if (take_failure()) return fail(cudaErrorMemoryAllocation);
    void* p = std::aligned_alloc(256, (std::max<std::size_t>(bytes, 1) + 255) / 256 * 256);
    if (!p) return fail(cudaErrorMemoryAllocation);
    std::lock_guard<std::mutex> lock(device_mutex);
    pinned()[p] = bytes;
    *ptr = p;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void** ptr, std::size_t bytes) { return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault); }
cudaError_t cudaFreeHost(void* ptr) {
    if (!ptr) return cudaSuccess;
    std::lock_guard<std::mutex> lock(device_mutex);
    if (!pinned().erase(ptr)) return fail(cudaErrorInvalidValue);
    std::free(ptr);
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
    if (!s) return fail(cudaErrorInvalidValue);
    *s = new CUstream_st;
    std::lock_guard<std::mutex> lock(streams_mutex);
    created_streams().insert(*s);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s) return fail(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::mutex> lock(streams_mutex);
    (void)flush(*s);  // (CUDA finishes the queued work of a destroyed stream)
    created_streams().erase(s);
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return synchronize(resolve(s)); }
cudaError_t cudaStreamQuery(cudaStream_t s) {
    CUstream_st& st = resolve(s);
    if (st.pending.empty()) return cudaSuccess;
    (void)flush(st);  // pending now: it completes "in the background" before the next query
    return cudaErrorNotReady;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
    if (!e) return fail(cudaErrorInvalidValue);
    *e = new CUevent_st;
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    CUstream_st& st = resolve(s);
    std::lock_guard<std::mutex> lock(device_mutex);
    e->stream = &st;
    e->at = st.queued;
    e->reported_pending = false;
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    if (!e->stream || e->stream->done >= e->at) return cudaSuccess;
    // pending: the first query says so, and the work completes before the next one
    (void)flush(*e->stream);
    return cudaErrorNotReady;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    if (!e->stream) return cudaSuccess;
    return synchronize(*e->stream);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
    if (bytes == 0) return cudaSuccess;
    const bool dst_device = is_device(dst, bytes), src_device = is_device(src, bytes);
    const bool ok = (kind == cudaMemcpyHostToDevice && dst_device && !src_device) || (kind == cudaMemcpyDeviceToHost && src_device && !dst_device) ||
                    (kind == cudaMemcpyDeviceToDevice && src_device && dst_device) || kind == cudaMemcpyDefault;
    if (!ok) {
        std::fprintf(stderr, "depthlab CUDA emulation: cudaMemcpyAsync of %zu bytes: the pointers do not match the direction %d\n", bytes,
                     static_cast<int>(kind));
        return fail(cudaErrorInvalidValue);
    }
    if (kind == cudaMemcpyHostToDevice) {
        ++totals.uploads;
        // a pageable source is read at the call (as CUDA stages it); pinned memory would be
        // read when the copy runs, so it is read then too
        const bool from_pinned = pinned().count(const_cast<void*>(src)) > 0;
        if (!from_pinned) {
            auto copy = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
            enqueue(s, "cudaMemcpyAsync (host to device)", [=] { std::memcpy(dst, copy->data(), bytes); });
            return cudaSuccess;
        }
    }
    if (kind == cudaMemcpyDeviceToHost) ++totals.downloads;
    enqueue(s, "cudaMemcpyAsync", [=] { std::memcpy(dst, src, bytes); });
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
    if (e != cudaSuccess) return e;
    return synchronize(legacy_stream());
}
cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t s) {
    if (!is_device(dst, bytes)) return fail(cudaErrorInvalidValue);
    enqueue(s, "cudaMemsetAsync", [=] { std::memset(dst, value, bytes); });
    return cudaSuccess;
}

// ============================================================ cuBLAS

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    *handle = new cublasContext;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, std::size_t bytes) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (bytes > 0 && (reinterpret_cast<std::uintptr_t>(workspace) % 256 != 0 || !is_device(workspace, bytes))) return CUBLAS_STATUS_INVALID_VALUE;
    handle->workspace = workspace;
    handle->workspace_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* alpha,
                                         const float* A, int lda, long long sA, const float* B, int ldb, long long sB, const float* beta,
                                         float* C, int ldc, long long sC, int batch) {
    return gemm_strided_batched(h, ta, tb, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch, "cublasSgemmStridedBatched");
}
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const double* alpha,
                                         const double* A, int lda, long long sA, const double* B, int ldb, long long sB, const double* beta,
                                         double* C, int ldc, long long sC, int batch) {
    return gemm_strided_batched(h, ta, tb, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch, "cublasDgemmStridedBatched");
}
cublasStatus_t cublasSgemmBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* alpha,
                                  const float* const A[], int lda, const float* const B[], int ldb, const float* beta, float* const C[], int ldc,
                                  int batch) {
    return gemm_batched(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, batch, "cublasSgemmBatched");
}
cublasStatus_t cublasDgemmBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const double* alpha,
                                  const double* const A[], int lda, const double* const B[], int ldb, const double* beta, double* const C[],
                                  int ldc, int batch) {
    return gemm_batched(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, batch, "cublasDgemmBatched");
}

namespace {
/// The Ex calls' type combinations the emulation computes: {A and B, C, compute}.
enum class ex_kind { bf16_f32, f32, f64, unsupported };
ex_kind ex_types(cudaDataType a, cudaDataType b, cudaDataType c, cublasComputeType_t compute) {
    if (a != b) return ex_kind::unsupported;
    if (a == CUDA_R_16BF && c == CUDA_R_32F && compute == CUBLAS_COMPUTE_32F) return ex_kind::bf16_f32;
    if (a == CUDA_R_32F && c == CUDA_R_32F && (compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_FAST_TF32)) return ex_kind::f32;
    if (a == CUDA_R_64F && c == CUDA_R_64F && compute == CUBLAS_COMPUTE_64F) return ex_kind::f64;
    return ex_kind::unsupported;
}
}  // namespace

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* alpha,
                                          const void* A, cudaDataType at, int lda, long long sA, const void* B, cudaDataType bt, int ldb,
                                          long long sB, const void* beta, void* C, cudaDataType ct, int ldc, long long sC, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t) {
    constexpr const char* name = "cublasGemmStridedBatchedEx";
    switch (ex_types(at, bt, ct, compute)) {
    case ex_kind::bf16_f32:
        return gemm_strided_batched(h, ta, tb, m, n, k, static_cast<const float*>(alpha), static_cast<const __nv_bfloat16*>(A), lda, sA,
                                    static_cast<const __nv_bfloat16*>(B), ldb, sB, static_cast<const float*>(beta), static_cast<float*>(C), ldc, sC,
                                    batch, name);
    case ex_kind::f32:
        return gemm_strided_batched(h, ta, tb, m, n, k, static_cast<const float*>(alpha), static_cast<const float*>(A), lda, sA,
                                    static_cast<const float*>(B), ldb, sB, static_cast<const float*>(beta), static_cast<float*>(C), ldc, sC, batch,
                                    name);
    case ex_kind::f64:
        return gemm_strided_batched(h, ta, tb, m, n, k, static_cast<const double*>(alpha), static_cast<const double*>(A), lda, sA,
                                    static_cast<const double*>(B), ldb, sB, static_cast<const double*>(beta), static_cast<double*>(C), ldc, sC,
                                    batch, name);
    case ex_kind::unsupported: break;
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}
cublasStatus_t cublasGemmBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* alpha,
                                   const void* const A[], cudaDataType at, int lda, const void* const B[], cudaDataType bt, int ldb,
                                   const void* beta, void* const C[], cudaDataType ct, int ldc, int batch, cublasComputeType_t compute,
                                   cublasGemmAlgo_t) {
    constexpr const char* name = "cublasGemmBatchedEx";
    switch (ex_types(at, bt, ct, compute)) {
    case ex_kind::bf16_f32:
        return gemm_batched(h, ta, tb, m, n, k, static_cast<const float*>(alpha), reinterpret_cast<const __nv_bfloat16* const*>(A), lda,
                            reinterpret_cast<const __nv_bfloat16* const*>(B), ldb, static_cast<const float*>(beta), reinterpret_cast<float* const*>(C),
                            ldc, batch, name);
    case ex_kind::f32:
        return gemm_batched(h, ta, tb, m, n, k, static_cast<const float*>(alpha), reinterpret_cast<const float* const*>(A), lda,
                            reinterpret_cast<const float* const*>(B), ldb, static_cast<const float*>(beta), reinterpret_cast<float* const*>(C), ldc,
                            batch, name);
    case ex_kind::f64:
        return gemm_batched(h, ta, tb, m, n, k, static_cast<const double*>(alpha), reinterpret_cast<const double* const*>(A), lda,
                            reinterpret_cast<const double* const*>(B), ldb, static_cast<const double*>(beta), reinterpret_cast<double* const*>(C),
                            ldc, batch, name);
    case ex_kind::unsupported: break;
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

// ============================================================ cuBLASLt

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    *handle = new cublasLtContext;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
    if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
    *desc = new cublasLtMatmulDescOpaque_t{compute, scale};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    delete desc;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf, std::size_t bytes) {
    if (!desc || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    const auto take = [&](auto& field) {
        if (bytes != sizeof field) return CUBLAS_STATUS_INVALID_VALUE;
        std::memcpy(&field, buf, bytes);
        return CUBLAS_STATUS_SUCCESS;
    };
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return take(desc->ta);
    case CUBLASLT_MATMUL_DESC_TRANSB: return take(desc->tb);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return take(desc->epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return take(desc->bias);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return take(desc->aux);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return take(desc->aux_ld);
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, std::uint64_t rows, std::uint64_t cols, std::int64_t ld) {
    if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
    *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    delete layout;
    return CUBLAS_STATUS_SUCCESS;
}

namespace depthlab_emulation {
namespace {
/// One Lt matmul once its types are known: checked like a cuBLAS GEMM, queued on `stream`.
template <class In, class T>
cublasStatus_t lt_matmul(const gemm_shape& g, const void* alpha, const void* A, const void* B, const void* beta, const void* C, void* D,
                         const cublasLtMatmulDescOpaque_t& e, cudaStream_t stream) {
    constexpr const char* name = "cublasLtMatmul";
    const T a = *static_cast<const T*>(alpha), b = *static_cast<const T*>(beta);
    if (C != D && b != T(0)) {
        std::fprintf(stderr, "depthlab CUDA emulation: %s: C apart from D with beta != 0 is not emulated\n", name);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    const bool bias_in = e.epilogue == CUBLASLT_EPILOGUE_BIAS || e.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    const bool bias_grad = e.epilogue == CUBLASLT_EPILOGUE_BGRADB;
    const bool gelu = e.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    const long long bias_length = bias_in ? g.m : bias_grad ? g.n : 0;
    const long long aux_reach = gelu && g.m > 0 && g.n > 0 ? static_cast<long long>(g.n - 1) * e.aux_ld + g.m : 0;
    auto o = outside_allocations<In>({{A, g.reach_a(), "A"}, {B, g.reach_b(), "B"}});
    if (!o) o = outside_allocations<T>({{D, g.reach_c(), "D"}, {e.bias, bias_length, "bias"}, {e.aux, aux_reach, "aux"}});
    if (o) {
        std::fprintf(stderr, "depthlab CUDA emulation: %s: operand %s (%p, %lld elements reached by m=%d n=%d k=%d and its layout) is not "
                             "inside one device allocation\n", name, o->what, o->p, o->elements, g.m, g.n, g.k);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    ++totals.gemms;
    if (g.m == 0 || g.n == 0) return CUBLAS_STATUS_SUCCESS;
    const auto* pa = static_cast<const In*>(A);
    const auto* pb = static_cast<const In*>(B);
    auto* pd = static_cast<T*>(D);
    const auto* pbias = bias_in ? static_cast<const T*>(e.bias) : nullptr;
    auto* pgrad = bias_grad ? static_cast<T*>(const_cast<void*>(e.bias)) : nullptr;
    auto* paux = gelu ? static_cast<T*>(e.aux) : nullptr;
    const long long aux_ld = e.aux_ld;
    enqueue(stream, name, [=] {
        profiled(name, static_cast<std::int64_t>(g.m) * g.n, [&] {
            std::vector<double> ap;
            reference_gemm(g, a, pa, pb, b, pd, ap, pbias);
            if (paux)  // GELU (tanh form) of the biased product, its input kept
                for (int j = 0; j < g.n; ++j)
                    for (int i = 0; i < g.m; ++i) {
                        T& d = pd[i + static_cast<long long>(j) * g.ldc];
                        paux[i + j * aux_ld] = d;
                        const double x = static_cast<double>(d);
                        d = static_cast<T>(0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))));
                    }
            if (pgrad)  // the sums of op(B) over k, one per column of D
                for (int j = 0; j < g.n; ++j) {
                    double sum = 0;
                    for (int l = 0; l < g.k; ++l)
                        sum += widen(g.tb == CUBLAS_OP_N ? pb[l + static_cast<long long>(j) * g.ldb] : pb[j + static_cast<long long>(l) * g.ldb]);
                    pgrad[j] = static_cast<T>(sum);
                }
        });
    });
    return CUBLAS_STATUS_SUCCESS;
}
}  // namespace
}  // namespace depthlab_emulation

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A, cublasLtMatrixLayout_t al,
                              const void* B, cublasLtMatrixLayout_t bl, const void* beta, const void* C, cublasLtMatrixLayout_t cl, void* D,
                              cublasLtMatrixLayout_t dl, const cublasLtMatmulAlgo_t*, void* workspace, std::size_t workspace_bytes,
                              cudaStream_t stream) {
    using namespace depthlab_emulation;
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!desc || !al || !bl || !cl || !dl || !alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
    const auto ta = static_cast<cublasOperation_t>(desc->ta), tb = static_cast<cublasOperation_t>(desc->tb);
    // D is m x n; op(A) m x k; op(B) k x n; C laid out as D
    const auto m = static_cast<long long>(dl->rows), n = static_cast<long long>(dl->cols);
    const auto k = static_cast<long long>(ta == CUBLAS_OP_N ? al->cols : al->rows);
    const bool fits = (ta == CUBLAS_OP_N ? al->rows : al->cols) == dl->rows && (tb == CUBLAS_OP_N ? bl->rows : bl->cols) == static_cast<std::uint64_t>(k) &&
                      (tb == CUBLAS_OP_N ? bl->cols : bl->rows) == dl->cols && cl->rows == dl->rows && cl->cols == dl->cols && cl->ld == dl->ld &&
                      cl->type == dl->type &&
                      std::max({m, n, k, static_cast<long long>(al->ld), static_cast<long long>(bl->ld), static_cast<long long>(dl->ld)}) <= 2147483647LL;
    const gemm_shape g{ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), static_cast<int>(al->ld), static_cast<int>(bl->ld),
                       static_cast<int>(dl->ld)};
    if (!fits || !g.valid(1)) {
        std::fprintf(stderr, "depthlab CUDA emulation: cublasLtMatmul: invalid layouts (A %llux%llu ld %lld, B %llux%llu ld %lld, D %llux%llu ld %lld)\n",
                     static_cast<unsigned long long>(al->rows), static_cast<unsigned long long>(al->cols), static_cast<long long>(al->ld),
                     static_cast<unsigned long long>(bl->rows), static_cast<unsigned long long>(bl->cols), static_cast<long long>(bl->ld),
                     static_cast<unsigned long long>(dl->rows), static_cast<unsigned long long>(dl->cols), static_cast<long long>(dl->ld));
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (workspace_bytes > 0 && !is_device(workspace, workspace_bytes)) return CUBLAS_STATUS_INVALID_VALUE;
    switch (desc->epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT: break;
    case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_BGRADB:
        if (!desc->bias) return CUBLAS_STATUS_INVALID_VALUE;
        break;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
        // the aux matrix: a leading dimension that is a multiple of 8 and covers D's rows
        if (!desc->bias || !desc->aux || desc->aux_ld % 8 != 0 || desc->aux_ld < static_cast<std::int64_t>(dl->rows)) {
            std::fprintf(stderr, "depthlab CUDA emulation: cublasLtMatmul: GELU_AUX_BIAS needs a bias, an aux pointer and an aux leading "
                                 "dimension that is a multiple of 8 and >= %llu (got %lld)\n",
                         static_cast<unsigned long long>(dl->rows), static_cast<long long>(desc->aux_ld));
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    switch (ex_types(al->type, bl->type, dl->type, desc->compute)) {
    case ex_kind::bf16_f32:
        if (desc->scale != CUDA_R_32F) break;
        return lt_matmul<__nv_bfloat16, float>(g, alpha, A, B, beta, C, D, *desc, stream);
    case ex_kind::f32:
        if (desc->scale != CUDA_R_32F) break;
        return lt_matmul<float, float>(g, alpha, A, B, beta, C, D, *desc, stream);
    case ex_kind::f64:
        if (desc->scale != CUDA_R_64F) break;
        return lt_matmul<double, double>(g, alpha, A, B, beta, C, D, *desc, stream);
    case ex_kind::unsupported: break;
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}
