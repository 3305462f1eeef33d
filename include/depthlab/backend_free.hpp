#pragma once
// The device-agnostic part of depthlab: tensors, autodiff, layers, models, optimisers,
// adaptive depth, the component analyses, metrics, progress lines. None of it reaches
// memory except through memory<B> and primitives<B>, and none of it includes a backend:
// depthlab.hpp adds the CPU backends (cpu, host_device) and the host-side data, I/O and
// reports; a CUDA translation unit adds depthlab/backend/cuda/cuda.cuh instead, so that nvcc
// never sees the CPU's SIMD kernels, oneDNN or Eigen.
#include "depthlab/version.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/core/portable.hpp"
#include "depthlab/core/shape.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/core/parallel.hpp"
#include "depthlab/backend/backend.hpp"
#include "depthlab/core/tensor.hpp"
#include "depthlab/core/value_scan.hpp"
#include "depthlab/autodiff/op_kind.hpp"
#include "depthlab/autodiff/variable.hpp"
#include "depthlab/autodiff/ops.hpp"
#include "depthlab/autodiff/attention.hpp"
#include "depthlab/nn/module.hpp"
#include "depthlab/nn/layers.hpp"
#include "depthlab/nn/transformer.hpp"
#include "depthlab/nn/models.hpp"
#include "depthlab/nn/decoding.hpp"
#include "depthlab/nn/classification.hpp"
#include "depthlab/optim/optimizer.hpp"
#include "depthlab/optim/sgd.hpp"
#include "depthlab/optim/adam.hpp"
#include "depthlab/optim/lamb.hpp"
#include "depthlab/optim/schedule.hpp"
#include "depthlab/optim/clip.hpp"
#include "depthlab/nn/snapshot.hpp"
#include "depthlab/data/synthetic.hpp"
#include "depthlab/metrics/bleu.hpp"
#include "depthlab/metrics/chrf.hpp"
#include "depthlab/train/progress.hpp"
#include "depthlab/halting/act.hpp"
#include "depthlab/analysis/component_value.hpp"
