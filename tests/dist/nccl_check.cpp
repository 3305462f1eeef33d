// dist::nccl_communicator on CUDA device buffers (ctest dist_nccl, the --cuda stage): an
// all-reduce, a broadcast and an all-gather of device tensors, then the data-parallel
// gradient buckets of a layer on backend::cuda, checked against the host sums. Built by g++
// (the CUDA half is depthlab::cuda); run as `mpirun -np N depthlab_nccl_check` or alone.
// Without a GPU it prints one line and exits 0: compiled and linked, not run.
#include <cstdio>
#include <vector>

#include <depthlab/depthlab.hpp>
#include <depthlab/backend/cuda/cuda.hpp>
#include <depthlab/dist/nccl.hpp>

using namespace depthlab;

namespace {
int failures = 0;
void expect(bool ok, const char* what) {
    if (!ok) {
        ++failures;
        std::fprintf(stderr, "dist_nccl: FAILED: %s\n", what);
    }
}
}  // namespace

int main(int argc, char** argv) {
    dist::mpi_communicator host(&argc, &argv);
    if (cuda::device_count() == 0) {
        if (host.is_root()) std::printf("dist_nccl: no CUDA device here; compiled and linked, not run\n");
        return 0;
    }
    try {
        dist::nccl_communicator comm(host);
        const int r = comm.rank(), n = comm.size();
        auto t = Tensor<float, backend::cuda>::full({1000}, static_cast<float>(r + 1));
        comm.all_reduce(t.data(), 1000);
        for (float v : t.to_vector()) expect(v == static_cast<float>(n * (n + 1) / 2), "all_reduce sum");
        auto m = Tensor<float, backend::cuda>::full({10}, static_cast<float>(2 * r));
        comm.all_reduce(m.data(), 10, dist::reduce_op::average);
        for (float v : m.to_vector()) expect(v == static_cast<float>(n - 1), "all_reduce average");
        auto b = Tensor<float, backend::cuda>::full({7}, static_cast<float>(r));
        comm.broadcast(b.data(), 7, n - 1);
        for (float v : b.to_vector()) expect(v == static_cast<float>(n - 1), "broadcast");
        auto mine = Tensor<float, backend::cuda>::full({3}, static_cast<float>(r));
        auto all = Tensor<float, backend::cuda>::empty({3 * n});
        comm.all_gather(mine.data(), 3, all.data());
        const auto g = all.to_vector();
        for (int k = 0; k < 3 * n; ++k) expect(g[k] == static_cast<float>(k / 3), "all_gather");

        // Gradient buckets on the device: each rank's gradient is rank + 1; the sum arrives.
        Generator gen(1);
        nn::Linear<float, backend::cuda> layer(16, 8, gen);
        dist::gradient_buckets<float, backend::cuda> buckets(comm, dist::distinct_parameters(layer.named_parameters()));
        buckets.zero();
        for (const auto& [name, p] : layer.named_parameters()) p.grad() = Tensor<float, backend::cuda>::full(p.shape(), static_cast<float>(r + 1));
        buckets.add_gradients();
        buckets.finish();
        for (const auto& [name, p] : layer.named_parameters())
            for (float v : p.grad().to_vector()) expect(v == static_cast<float>(n * (n + 1) / 2), "gradient buckets");
        if (comm.is_root())
            std::printf("dist_nccl: %d rank(s) on %s: %s\n", n, cuda::device_description(0).c_str(), failures ? "FAILED" : "passed");
    } catch (const std::exception& e) {
        host.abort(1, std::string("dist_nccl: error: ") + e.what());
    }
    std::int32_t any = failures;
    host.all_reduce(&any, 1);
    return any ? 1 : 0;
}
