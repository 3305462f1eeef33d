#pragma once
// depthlab: train transformers on CPU (and GPU) and measure how much depth they use.
// One include for everything.
#include "depthlab/version.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/core/shape.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/core/parallel.hpp"
#include "depthlab/backend/backend.hpp"
#include "depthlab/backend/cpu/cpu.hpp"
#include "depthlab/core/tensor.hpp"
#include "depthlab/autodiff/op_kind.hpp"
#include "depthlab/autodiff/variable.hpp"
#include "depthlab/autodiff/ops.hpp"
#include "depthlab/autodiff/attention.hpp"
#include "depthlab/nn/module.hpp"
#include "depthlab/nn/layers.hpp"
#include "depthlab/nn/transformer.hpp"
#include "depthlab/nn/models.hpp"
