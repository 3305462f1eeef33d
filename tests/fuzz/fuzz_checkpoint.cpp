// libFuzzer harness: a checkpoint (parameters + optimiser state) loaded into a small model
// and an Adam optimiser, as `--resume` does. Every failure must be a depthlab::error and
// must leave the model's parameters and the optimiser's state exactly as they were.
#include <cstring>

#include <depthlab/io/checkpoint.hpp>

#include "fuzz_input.hpp"
#include "fuzz_model.hpp"

using namespace depthlab;

namespace {
using fuzz::tiny_model;

std::vector<float> parameters_of(const tiny_model& m) {
    std::vector<float> all;
    for (const auto& [name, p] : m.named_parameters()) {
        const auto v = p.value().to_vector();
        all.insert(all.end(), v.begin(), v.end());
    }
    return all;
}
std::vector<float> state_of(const optim::Adam<float>& opt) {
    std::vector<float> all;
    for (const auto& [name, t] : opt.state_tensors()) {
        const auto v = t.to_vector();
        all.insert(all.end(), v.begin(), v.end());
    }
    all.push_back(static_cast<float>(opt.step_count()));
    all.push_back(static_cast<float>(opt.lr()));
    return all;
}
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const std::string path = fuzz::scratch_path("checkpoint");
    Generator gen(7);
    tiny_model model(gen);
    optim::Adam<float> adam(model.named_parameters());
    fuzz::one_step(model, adam);  // so that the optimiser has state that a failed load must keep
    const std::vector<float> params_before = parameters_of(model), state_before = state_of(adam);

    fuzz::write_file(path, {reinterpret_cast<const char*>(data), size});
    bool model_loaded = false, state_loaded = false;
    try {
        io::training_state<float> st = io::load_checkpoint(path, model, /*strict=*/false);
        model_loaded = true;
        adam.load_state(st.section_tensors("optim"), st.section_metadata("optim"), path);
        state_loaded = true;
        (void)st.get_u64("step");
    } catch (const depthlab::error&) {
        // A failed load_checkpoint leaves the model untouched; a failed load_state (after a
        // load_checkpoint that succeeded, or not reached) leaves the optimiser untouched.
        if (!model_loaded && !same_bits(params_before, parameters_of(model))) fuzz::fail("a failed checkpoint load changed the model");
        if (!state_loaded && !same_bits(state_before, state_of(adam))) fuzz::fail("a failed load changed the optimiser state");
    }
    return 0;
}
