#pragma once
// The whole public API of Fathom in one include.

#include "core/allocator.h"
#include "core/cuda/cuda_runtime.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/logging.h"
#include "core/memory_stats.h"
#include "core/shape.h"
#include "core/shape_ops.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "kernels/elementwise.h"
