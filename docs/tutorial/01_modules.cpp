// A model from modules, a forward pass, a backward pass, and what PyTorch users look for.
#include <depthlab/depthlab.hpp>

#include <iostream>

using namespace depthlab;

int main() {
    Generator gen(0);
    nn::Sequential<float> mlp;  // names "0.weight", "0.bias", "2.weight", ... as torch.nn.Sequential
    mlp.add<nn::Linear<float>>(4, 16, gen);
    mlp.then([](const Var<float>& x) { return relu(x); });
    mlp.add<nn::Linear<float>>(16, 3, gen);

    const auto x = Var<float>::constant(Tensor<float>::randn({8, 4}, gen));  // (batch, features)
    const std::vector<std::int64_t> labels{0, 1, 2, 0, 1, 2, 0, 1};
    const auto logits = mlp(x);                                               // (8, 3)
    auto loss = cross_entropy(logits, labels);
    loss.backward();  // a second loss.backward() throws, as in PyTorch (see retain_graph)

    std::cout << loss;                                   // shape, op and value
    std::cout << "accuracy " << nn::accuracy(logits, labels).percent() << "%\n";
    for (const auto& [name, p] : mlp.named_parameters()) std::cout << name << " " << p.shape() << " grad " << p.grad().shape() << "\n";
    return mlp.parameter_count() == 4 * 16 + 16 + 16 * 3 + 3 ? 0 : 1;
}
