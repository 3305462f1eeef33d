#pragma once
// The model and optimiser the checkpoint harness loads into, shared with fuzz_seeds so that
// the seed checkpoints match it exactly (the fuzzer then mutates valid files).
#include <depthlab/nn/layers.hpp>
#include <depthlab/optim/adam.hpp>

namespace depthlab::fuzz {

struct tiny_model : nn::Module<float> {
    nn::Linear<float>* proj;
    nn::LayerNorm<float>* norm;
    explicit tiny_model(Generator& g) {
        proj = &this->register_module("proj", std::make_unique<nn::Linear<float>>(3, 2, g));
        norm = &this->register_module("norm", std::make_unique<nn::LayerNorm<float>>(2));
    }
};

/// Gives every parameter a gradient and takes one Adam step (so the optimiser has state).
inline void one_step(tiny_model& m, optim::Adam<float>& adam) {
    for (auto& [name, p] : m.named_parameters()) p.grad() = Tensor<float>::full(p.value().shape(), 0.5f);
    adam.step();
}

}  // namespace depthlab::fuzz
