// The op harness (tests/test_ops.cpp) on backend::cuda.
#include "../test_ops.cpp"
