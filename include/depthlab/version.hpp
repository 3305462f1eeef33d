#pragma once

namespace depthlab {
inline constexpr int version_major = 0;
inline constexpr int version_minor = 1;
inline constexpr int version_patch = 0;
inline const char* version_string() { return "0.1.0"; }
}  // namespace depthlab
