#pragma once
// Deprecated: the former name of depthlab/backend_free.hpp (the headers that need no CPU
// backend, what nvcc sees), kept for one release.
#include "depthlab/backend_free.hpp"
