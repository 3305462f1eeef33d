// The one test executable's main (doctest). All test files link into depthlab_tests.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
