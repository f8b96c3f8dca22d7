// The LibTorch headers every torch-facing translation unit needs; precompiled once.
#pragma once
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <torch/torch.h>
