// Layer and model parity with PyTorch (tests/test_layers_parity.cpp) on backend::cuda.
#include "../test_layers_parity.cpp"
