// The small-op PyTorch parity cases (tests/test_torch_parity.cpp) on backend::cuda.
#include "../test_torch_parity.cpp"
