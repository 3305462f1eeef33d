#pragma once
// Facts about the build that reports record (defined in the build_info.cpp that
// examples/CMakeLists.txt generates when CMake configures).
namespace examples {
/// Short commit hash of the source tree, "+changes" when it had uncommitted changes, or
/// "unknown (not built from a git checkout)".
extern const char* const git_commit;
}  // namespace examples
