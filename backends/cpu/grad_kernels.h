// CPU kernels of the project's own ops (domain ai.onnx_amp, graph/amp_ops.h): the gradient ops
// that standard ONNX lacks, SumToShape, AllFinite, AllReduce, Gelu / GeluGrad (rows of the
// elementwise op table, elementwise.cc) and the ops of opsets after 17 that this domain carries
// (Attention, DeformConv, Col2Im). Same OpEntry pattern as the default-domain families;
// find_amp_op() is the lookup for nodes of that domain.
#pragma once

#include "backends/cpu/kernel.h"
#include "graph/ops/elementwise_program.h"

namespace amp::cpu {

const OpEntry* find_amp_op(std::string_view op);
// ai.onnx.ml's preprocessing ops (classical_ml.cc).
const OpEntry* find_classical_ml_op(std::string_view op);
// The entry for an op of a domain the CPU backend runs ("", ai.onnx_amp, ai.onnx.ml); nullptr if none.
const OpEntry* find_op(std::string_view domain, std::string_view op);

// The family tables find_amp_op() joins, one per grad_*.cc file and elementwise.cc's ai.onnx_amp rows.
const std::vector<OpEntry>& grad_conv_ops();
const std::vector<OpEntry>& grad_pool_ops();
const std::vector<OpEntry>& grad_norm_ops();
const std::vector<OpEntry>& grad_loss_ops();
const std::vector<OpEntry>& grad_scatter_ops();
const std::vector<OpEntry>& grad_pad_ops();     // pad.cc
const std::vector<OpEntry>& grad_resize_ops();  // resize.cc
const std::vector<OpEntry>& grad_roi_align_ops();  // roi_align.cc
const std::vector<OpEntry>& grad_grid_sample_ops();  // grid_sample.cc
const std::vector<OpEntry>& grad_all_finite_ops();
const std::vector<OpEntry>& grad_softmax_ops();
const std::vector<OpEntry>& amp_elementwise_ops();
const std::vector<OpEntry>& fused_elementwise_ops();  // fused_elementwise.cc
// The kernel of a FusedElementwise step made at compile time (cpu/fused_steps.h).
std::unique_ptr<Kernel> make_fused_elementwise_kernel(ElementwiseProgram program);
const std::vector<OpEntry>& all_reduce_ops();  // all_reduce.cc
const std::vector<OpEntry>& attention_ops();   // attention.cc: Attention and AttentionGrad
const std::vector<OpEntry>& recurrent_grad_ops();  // recurrent.cc: LSTMGrad, GRUGrad, RNNGrad
// ONNX ops of opsets 18+ that the import carries into ai.onnx_amp (graph/onnx_newer_opsets.h).
const std::vector<OpEntry>& bitwise_ops();                    // bitwise.cc: BitwiseAnd, Or, Xor, Not
const std::vector<OpEntry>& scatter_elements_opset18_ops();   // gather_elements.cc: max and min too
const std::vector<OpEntry>& scatter_nd_opset18_ops();         // scatter_nd.cc: max and min too
const std::vector<OpEntry>& deform_conv_ops();  // deform_conv.cc: DeformConv and DeformConvGrad
const std::vector<OpEntry>& col2im_ops();       // col2im.cc: Col2Im and Im2Col

}  // namespace amp::cpu
