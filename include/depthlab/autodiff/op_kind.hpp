#pragma once
// The list of differentiable ops. The test harness (tests/test_ops.cpp) checks that every
// entry here has a reference, a finite-difference gradient check and a float-vs-double
// case, so an op cannot be added without being tested.

namespace depthlab {

#define DEPTHLAB_OPS(X)                                                                                     \
    X(leaf) X(matmul) X(linear) X(add) X(mul) X(scale) X(bias) X(gelu) X(gelu_erf) X(relu) X(tanh) X(sigmoid) \
    X(log_sigmoid) X(softmax) X(log_softmax) X(cross_entropy) X(layer_norm) X(dropout) X(embedding) X(concat) \
    X(split) X(slice) X(reshape) X(transpose) X(gather_rows) X(scatter_rows) X(sum) X(mean) X(mse) X(attention)\
    X(ragged_attention) X(scale_rows) X(interpolate_rows) X(row_update) X(act_halting) X(linear_gelu) \
    X(residual_layer_norm)

enum class op_kind : int {
#define DEPTHLAB_OP_ENUM(name) name,
    DEPTHLAB_OPS(DEPTHLAB_OP_ENUM)
#undef DEPTHLAB_OP_ENUM
        count_
};

inline constexpr int op_count = static_cast<int>(op_kind::count_);

inline const char* op_name(op_kind k) {
    switch (k) {
#define DEPTHLAB_OP_NAME(name) \
    case op_kind::name: return #name;
        DEPTHLAB_OPS(DEPTHLAB_OP_NAME)
#undef DEPTHLAB_OP_NAME
        default: return "?";
    }
}

}  // namespace depthlab
