#pragma once
// The cuBLASLt subset depthlab's backend uses, on the emulated device: one matmul with its
// operation descriptor (transposes, epilogue, bias pointer) and matrix layouts (element type,
// rows, columns, leading dimension), computed by the same reference loops as cuBLAS's GEMMs
// (depthlab_cuda_emulation.hpp). Epilogues, as NVIDIA documents them: DEFAULT; BIAS (a vector
// of D's row count added to every column); GELU_AUX_BIAS (then GELU, tanh form, with its input
// written to the aux matrix: leading dimension a multiple of 8, at least D's rows, else
// CUBLAS_STATUS_INVALID_VALUE); BGRADB (the sums of op(B) over k, one per column of D, written
// to the bias pointer). Element types: float, double, and bf16 A and B with float C and D.
// Anything else returns CUBLAS_STATUS_NOT_SUPPORTED, as the library does where it has no
// kernel, so callers keep a path for that answer.
#include <cstdint>

#include "cublas_v2.h"

struct cublasLtContext;
using cublasLtHandle_t = cublasLtContext*;
struct cublasLtMatmulDescOpaque_t;
using cublasLtMatmulDesc_t = cublasLtMatmulDescOpaque_t*;
struct cublasLtMatrixLayoutOpaque_t;
using cublasLtMatrixLayout_t = cublasLtMatrixLayoutOpaque_t*;
struct cublasLtMatmulAlgo_t {
    std::uint64_t data[8];
};

enum cublasLtMatmulDescAttributes_t {
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
};
enum cublasLtEpilogue_t {
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 164,
    CUBLASLT_EPILOGUE_BGRADB = 512,
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
/// The attribute's value is read from buf; sizeInBytes must be the attribute's size.
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf, std::size_t sizeInBytes);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, std::uint64_t rows, std::uint64_t cols, std::int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);
/// D = alpha op(A) op(B) + beta C, then the epilogue, column-major, queued on
/// `stream`; algo may be null (the library then picks one), the workspace must be device
/// memory of the size given. C and D may be the same matrix.
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                              const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace, std::size_t workspaceSizeInBytes,
                              cudaStream_t stream);
