// Checkpoints: parameters, optimiser state, generators and the model config in one
// safetensors file; the config rebuilds the model without flags.
#include <depthlab/depthlab.hpp>

#include <filesystem>
#include <iostream>

using namespace depthlab;

int main() {
    std::filesystem::create_directories("runs/tutorial_checkpoints");
    const std::string path = "runs/tutorial_checkpoints/checkpoint.safetensors";
    nn::albert_config cfg{.vocab = 50, .embed = 16, .max_len = 32, .depth = 3};
    cfg.layer.dim = 32, cfg.layer.heads = 4, cfg.layer.ff_dim = 64;
    nn::Albert<float> model(cfg, /*seed=*/5);
    optim::Lamb<float> lamb(model.named_parameters(), {});
    Generator data(9);

    train::checkpointer<float> save(path);
    save.track("data", data);
    io::save_config(save.metadata(), "config.", cfg);
    save.save(model, &lamb, /*step=*/100);

    // later, elsewhere: the config from the file, then the model, then its state
    const auto cfg2 = io::load_config<nn::albert_config>(io::safetensors_file(path).metadata(), "config.");
    nn::Albert<float> again(cfg2, /*seed=*/0);  // another init: the load overwrites it
    optim::Lamb<float> lamb2(again.named_parameters(), {});
    Generator data2(0);
    train::checkpointer<float> load(path);
    load.track("data", data2);
    const std::int64_t step = load.load(again, &lamb2);
    const bool same = again.parameter("embeddings.word_embeddings.weight").value().to_vector() == model.parameter("embeddings.word_embeddings.weight").value().to_vector();
    const bool same_draw = data.uniform() == data2.uniform();  // the generator continues where it was saved
    std::cout << "step " << step << ", parameters equal: " << (same ? "yes" : "no") << ", next draw equal: " << (same_draw ? "yes" : "no") << "\n";
    return step == 100 && same && same_draw ? 0 : 1;
}
