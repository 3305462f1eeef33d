// Built against single_include/ only (not the depthlab target): checks that the
// amalgamated header is self-contained and matches the project version.
#include <depthlab/depthlab.hpp>

#include <cstdio>
#include <cstring>

int main() {
    const char* v = depthlab::version_string();
    std::printf("depthlab (single header) version: %s\n", v);
#ifdef DEPTHLAB_EXPECTED_VERSION
    if (std::strstr(v, DEPTHLAB_EXPECTED_VERSION) == nullptr) {
        std::printf("expected version %s (project() VERSION)\n", DEPTHLAB_EXPECTED_VERSION);
        return 1;
    }
#endif
    return 0;
}
