#pragma once
// depthlab: train transformers on CPU (and GPU) and measure how much depth they use.
// One include for everything on the host: the device-agnostic library, the CPU backends
// (backend::cpu and backend::host_device), and the host-side data pipelines, checkpoints
// and reports. (CUDA: depthlab/backend/cuda/cuda.hpp, linking depthlab::cuda; see docs/devices.md.)
#include "depthlab/backend_free.hpp"
#include "depthlab/backend/cpu/cpu.hpp"
#include "depthlab/backend/host_device/host_device.hpp"
#include "depthlab/backend/cpu/eigen.hpp"
#include "depthlab/compiled.hpp"  // (declares the compiled instantiations extern under DEPTHLAB_COMPILED)
#include "depthlab/data/translation.hpp"
#include "depthlab/io/safetensors.hpp"
#include "depthlab/io/checkpoint.hpp"
#include "depthlab/io/config.hpp"
#include "depthlab/io/name_map.hpp"
#include "depthlab/io/layouts.hpp"
#include "depthlab/io/pretrained.hpp"
#include "depthlab/train/checkpointer.hpp"
#include "depthlab/train/trainer.hpp"
#include "depthlab/data/albert_data.hpp"
#include "depthlab/data/probing.hpp"
#include "depthlab/data/language_model.hpp"
#include "depthlab/report/html.hpp"
#include "depthlab/halting/act_albert.hpp"
#include "depthlab/halting/analysis.hpp"
#include "depthlab/nn/translator.hpp"
#include "depthlab/train/translation.hpp"
#include "depthlab/train/translation_score.hpp"
#include "depthlab/metrics/bootstrap.hpp"
#include "depthlab/analysis/study.hpp"
#include "depthlab/analysis/pipeline.hpp"
#include "depthlab/analysis/language_model.hpp"
#include "depthlab/report/component_value.hpp"
#include "depthlab/report/act_albert.hpp"
