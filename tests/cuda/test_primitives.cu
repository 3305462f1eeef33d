// The backend primitives tests (tests/test_primitives.cpp) on backend::cuda.
#include "../test_primitives.cpp"
