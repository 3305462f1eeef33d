#pragma once
// Deprecated: the update rules moved to backend/update_rules.hpp (the backend floor, where
// primitives<B> apply them; namespace optim::rules unchanged). Kept for one release.
#include "depthlab/backend/update_rules.hpp"
