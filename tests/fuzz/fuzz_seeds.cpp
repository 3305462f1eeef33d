// Writes the seed corpora of the fuzz harnesses with depthlab's own writers:
//   fuzz_seeds <dir>   ->  <dir>/{fuzz_safetensors,fuzz_checkpoint,fuzz_text_readers,fuzz_metrics}/seed_*
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <depthlab/io/checkpoint.hpp>

#include "fuzz_model.hpp"

using namespace depthlab;
namespace fs = std::filesystem;

namespace {
void text(const fs::path& p, const std::string& s) {
    std::ofstream(p, std::ios::binary) << s;
}
}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: fuzz_seeds <dir>\n");
        return 2;
    }
    const fs::path root = argv[1];
    for (const char* h : {"fuzz_safetensors", "fuzz_checkpoint", "fuzz_text_readers", "fuzz_metrics"}) fs::create_directories(root / h);

    // safetensors: every dtype depthlab loads, metadata, a scalar, an empty tensor
    Generator gen(1);
    const fs::path st = root / "fuzz_safetensors";
    io::save_safetensors((st / "seed_f32").string(), {{"w", Tensor<float>::randn({2, 3}, gen)}, {"b", Tensor<float>::zeros({3})}},
                         {{"format", "pt"}});
    io::save_safetensors((st / "seed_mixed").string(),
                         {{"a", io::any_tensor(Tensor<double>::randn({4}, gen))},
                          {"ids", io::any_tensor(Tensor<std::int64_t>::from({3}, {1, 2, 3}))},
                          {"scalar", io::any_tensor(Tensor<float>::full({}, 2.5f))},
                          {"empty", io::any_tensor(Tensor<float>::zeros({0, 4}))}});

    // checkpoints of the harness's model: parameters only, and with the Adam state
    fuzz::tiny_model model(gen);
    optim::Adam<float> adam(model.named_parameters());
    const fs::path ck = root / "fuzz_checkpoint";
    io::save_parameters((ck / "seed_parameters").string(), model);
    fuzz::one_step(model, adam);
    io::training_state<float> state;
    state.add_section("optim", adam.state_tensors(), adam.state_scalars());
    state.set_u64("step", 1);
    state.set_generator("rng", gen);
    io::save_checkpoint((ck / "seed_checkpoint").string(), model, state);

    // text readers: the first NUL separates the two files of an aligned pair
    const fs::path tx = root / "fuzz_text_readers";
    text(tx / "seed_ids", "5 17 3\n8 9\n\n4 4 4 4\n");
    text(tx / "seed_vocab", "<pad>\t0\n<unk>\t0\n\xE2\x96\x81the\t-3.1\n,\t-4\n");
    text(tx / "seed_parallel", std::string("Can you spare a minute?\nYes.\n\0Haben Sie eine Minute Zeit?\nJa.\n", 62));

    // metrics: hypothesis<TAB>reference lines, with non-ASCII text and empty sides
    const fs::path mt = root / "fuzz_metrics";
    text(mt / "seed_ascii", "the cat sat on the mat\tthe cat is on the mat\na b\ta b c d\n\tempty hypothesis\n");
    text(mt / "seed_unicode", "Grüße aus München!\tGrüße aus Köln.\n\xE2\x80\x9CQuoted\xE2\x80\x9D \xE2\x80\x94 dash\t\xE2\x80\x9Cquoted\xE2\x80\x9D\n");
    std::printf("fuzz_seeds: wrote the seed corpora under %s\n", root.c_str());
    return 0;
}
