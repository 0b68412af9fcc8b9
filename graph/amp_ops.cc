#include "graph/amp_ops.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>
#include <onnx/defs/tensor_proto_util.h>

#include <mutex>

namespace amp {

namespace {

using onnx::AttributeProto;
using onnx::InferenceContext;
using onnx::OpSchema;

const std::vector<std::string> kFloatTypes = {"tensor(float16)", "tensor(bfloat16)", "tensor(float)",
                                              "tensor(double)"};
const std::vector<std::string> kIndexTypes = {"tensor(int32)", "tensor(int64)"};

// Output `out` has input `in`'s element type and shape: how every gradient relates to its forward input.
void like_input(InferenceContext& ctx, size_t in, size_t out) {
  if (out >= ctx.getNumOutputs()) return;
  onnx::propagateElemTypeFromInputToOutput(ctx, in, out);
  if (onnx::hasInputShape(ctx, in)) onnx::propagateShapeFromInputToOutput(ctx, in, out);
}

// The output's shape is the value of a 1-D int64 input (the forward input's Shape), when constant.
void shape_from_input(InferenceContext& ctx, size_t elem_from, size_t shape_input) {
  onnx::propagateElemTypeFromInputToOutput(ctx, elem_from, 0);
  bool found = false;
  onnx::TensorShapeProto shape = onnx::getShapeInput(ctx, shape_input, found);
  if (found) onnx::updateOutputShape(ctx, 0, shape);
}

// AllFinite(inputs...) or, scaled, AllFiniteScaled(scale, inputs...): a scalar bool.
OpSchema all_finite_schema(const char* name, const char* doc, bool scaled) {
  OpSchema s;
  s.SetName(name).SetDomain(kAmpDomain).SinceVersion(kAmpDomainVersion).SetLocation(__FILE__, __LINE__).SetDoc(doc);
  int first = 0;
  if (scaled) s.Input(first++, "scale", "Scalar float32 factor (1 / loss scale).", "tensor(float)");
  s.Input(first, "inputs", "Tensors to check.", "T", OpSchema::Variadic, false)
      .Output(0, "all_finite", "Scalar bool.", "tensor(bool)")
      .TypeConstraint("T", kFloatTypes, "Floating-point tensors.")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        onnx::updateOutputElemType(ctx, 0, onnx::TensorProto::BOOL);
        onnx::getOutputShape(ctx, 0);  // a scalar: a shape with no dims
      });
  return s;
}

OpSchema grad_schema(const char* name, const char* doc) {
  OpSchema s;
  s.SetName(name).SetDomain(kAmpDomain).SinceVersion(kAmpDomainVersion).SetDoc(doc).SetLocation(__FILE__, __LINE__);
  s.TypeConstraint("T", kFloatTypes, "Floating-point tensors.");
  return s;
}

void pool_attributes(OpSchema& s) {
  s.Attr("auto_pad", "As the forward op's.", AttributeProto::STRING, std::string("NOTSET"))
      .Attr("kernel_shape", "As the forward op's.", AttributeProto::INTS)
      .Attr("pads", "As the forward op's.", AttributeProto::INTS, false)
      .Attr("strides", "As the forward op's.", AttributeProto::INTS, false)
      .Attr("ceil_mode", "As the forward op's.", AttributeProto::INT, static_cast<int64_t>(0));
}

void loss_attributes(OpSchema& s) {
  s.Attr("reduction", "As the forward op's: none, sum or mean.", AttributeProto::STRING, std::string("mean"))
      .Attr("ignore_index", "As the forward op's.", AttributeProto::INT, false);
}

// DeformConv's attributes, shared by its gradient.
void deform_conv_attributes(OpSchema& s) {
  s.Attr("dilations", "Dilation per spatial axis (default 1).", AttributeProto::INTS, false)
      .Attr("group", "Groups of the input and output channels.", AttributeProto::INT, static_cast<int64_t>(1))
      .Attr("kernel_shape", "Kernel extents (default: W's).", AttributeProto::INTS, false)
      .Attr("offset_group", "Groups of input channels, each with its own offsets.", AttributeProto::INT,
            static_cast<int64_t>(1))
      .Attr("pads", "Padding at the begin and end of each spatial axis (default 0).", AttributeProto::INTS, false)
      .Attr("strides", "Stride per spatial axis (default 1).", AttributeProto::INTS, false);
}

// Col2Im's attributes, shared by Im2Col (its gradient).
void sliding_block_attributes(OpSchema& s) {
  s.Attr("dilations", "Dilation per spatial axis (default 1).", AttributeProto::INTS, false)
      .Attr("pads", "Padding at the begin and end of each spatial axis (default 0).", AttributeProto::INTS, false)
      .Attr("strides", "Stride per spatial axis (default 1).", AttributeProto::INTS, false);
}

struct Param {
  const char* name;
  const char* doc;
};

// The gradient of a loss op (dLoss, its scores, its class indices, optional class weights) with
// respect to the scores, with the loss op's attributes.
OpSchema loss_grad_schema(const char* name, const char* doc, Param dloss, Param scores, Param labels, Param weights,
                          Param dscores) {
  OpSchema s = grad_schema(name, doc);
  s.Input(0, dloss.name, dloss.doc, "T")
      .Input(1, scores.name, scores.doc, "T")
      .Input(2, labels.name, labels.doc, "Tind")
      .Input(3, weights.name, weights.doc, "T", OpSchema::Optional)
      .Output(0, dscores.name, dscores.doc, "T")
      .TypeConstraint("Tind", kIndexTypes, "Class index types.")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { like_input(ctx, 1, 0); });
  loss_attributes(s);
  return s;
}

std::vector<OpSchema> schemas() {
  std::vector<OpSchema> out;

  OpSchema conv = grad_schema("ConvGrad", "Gradients of Conv with respect to X, W and B from dY.");
  conv.Input(0, "dY", "Gradient of Conv's output.", "T")
      .Input(1, "X", "Conv's input.", "T")
      .Input(2, "W", "Conv's weight.", "T")
      .Output(0, "dX", "Gradient of X.", "T", OpSchema::Optional)
      .Output(1, "dW", "Gradient of W.", "T", OpSchema::Optional)
      .Output(2, "dB", "Gradient of the bias (sum of dY over all but the channel axis).", "T", OpSchema::Optional)
      .Attr("auto_pad", "As Conv's.", AttributeProto::STRING, std::string("NOTSET"))
      .Attr("dilations", "As Conv's.", AttributeProto::INTS, false)
      .Attr("group", "As Conv's.", AttributeProto::INT, static_cast<int64_t>(1))
      .Attr("kernel_shape", "As Conv's.", AttributeProto::INTS, false)
      .Attr("pads", "As Conv's.", AttributeProto::INTS, false)
      .Attr("strides", "As Conv's.", AttributeProto::INTS, false)
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        like_input(ctx, 1, 0);
        like_input(ctx, 2, 1);
        if (ctx.getNumOutputs() > 2) {
          onnx::propagateElemTypeFromInputToOutput(ctx, 2, 2);
          if (onnx::hasInputShape(ctx, 2) && onnx::getInputShape(ctx, 2).dim_size() > 0)
            *onnx::getOutputShape(ctx, 2)->add_dim() = onnx::getInputShape(ctx, 2).dim(0);
        }
      });
  out.push_back(std::move(conv));

  OpSchema deform_grad = grad_schema("DeformConvGrad",
                                     "Gradients of DeformConv with respect to X, W, offset, B and mask from dY.");
  deform_grad.Input(0, "dY", "Gradient of DeformConv's output.", "T")
      .Input(1, "X", "DeformConv's X.", "T")
      .Input(2, "W", "DeformConv's W.", "T")
      .Input(3, "offset", "DeformConv's offset.", "T")
      .Input(4, "mask", "DeformConv's mask, when it had one.", "T", OpSchema::Optional)
      .Output(0, "dX", "Gradient of X.", "T", OpSchema::Optional)
      .Output(1, "dW", "Gradient of W.", "T", OpSchema::Optional)
      .Output(2, "doffset", "Gradient of offset.", "T", OpSchema::Optional)
      .Output(3, "dB", "Gradient of B (dY summed over all but the channel axis).", "T", OpSchema::Optional)
      .Output(4, "dmask", "Gradient of mask.", "T", OpSchema::Optional);
  deform_conv_attributes(deform_grad);
  deform_grad.TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
    for (size_t k = 0; k < 3; ++k) like_input(ctx, k + 1, k);
    if (ctx.getNumOutputs() > 3) {
      onnx::propagateElemTypeFromInputToOutput(ctx, 2, 3);
      if (onnx::hasInputShape(ctx, 2) && onnx::getInputShape(ctx, 2).dim_size() > 0)
        *onnx::getOutputShape(ctx, 3)->add_dim() = onnx::getInputShape(ctx, 2).dim(0);
    }
    if (ctx.getNumOutputs() > 4 && ctx.getNumInputs() > 4) like_input(ctx, 4, 4);
  });
  out.push_back(std::move(deform_grad));

  // Col2Im's gradient: the sliding blocks of an image as columns, torch.nn.functional.unfold.
  OpSchema im2col = grad_schema("Im2Col",
                                "The sliding blocks of X [N, C, spatial...] as columns [N, C * prod(block_shape), L] "
                                "(zero where a block reaches into the padding): the gradient of Col2Im's input.");
  im2col.Input(0, "X", "Image [N, C, spatial...].", "T")
      .Input(1, "block_shape", "As Col2Im's.", "tensor(int64)")
      .Output(0, "Y", "Columns [N, C * prod(block_shape), L].", "T")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0); });
  sliding_block_attributes(im2col);
  out.push_back(std::move(im2col));

  OpSchema maxpool = grad_schema("MaxPoolGrad", "Routes dY to the arg-max of each MaxPool window of X.");
  maxpool.Input(0, "dY", "Gradient of MaxPool's output.", "T")
      .Input(1, "X", "MaxPool's input.", "T")
      .Output(0, "dX", "Gradient of X.", "T")
      .Attr("dilations", "As MaxPool's.", AttributeProto::INTS, false)
      .Attr("storage_order", "As MaxPool's.", AttributeProto::INT, static_cast<int64_t>(0))
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { like_input(ctx, 1, 0); });
  pool_attributes(maxpool);
  out.push_back(std::move(maxpool));

  OpSchema avgpool = grad_schema("AveragePoolGrad", "Spreads dY evenly over each AveragePool window of X.");
  avgpool.Input(0, "dY", "Gradient of AveragePool's output.", "T")
      .Input(1, "X", "AveragePool's input.", "T")
      .Output(0, "dX", "Gradient of X.", "T")
      .Attr("count_include_pad", "As AveragePool's.", AttributeProto::INT, static_cast<int64_t>(0))
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { like_input(ctx, 1, 0); });
  pool_attributes(avgpool);
  out.push_back(std::move(avgpool));

  OpSchema bn = grad_schema("BatchNormalizationGrad",
                            "Gradients of training-mode BatchNormalization (batch statistics recomputed from X).");
  bn.Input(0, "dY", "Gradient of the normalized output.", "T")
      .Input(1, "X", "BatchNormalization's input [N,C,...].", "T")
      .Input(2, "scale", "BatchNormalization's scale [C].", "T1")
      .Output(0, "dX", "Gradient of X.", "T")
      .Output(1, "dScale", "Gradient of scale.", "T1", OpSchema::Optional)
      .Output(2, "dBias", "Gradient of bias.", "T1", OpSchema::Optional)
      .Attr("epsilon", "As BatchNormalization's.", AttributeProto::FLOAT, 1e-5f)
      .TypeConstraint("T1", kFloatTypes, "Floating-point tensors.")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        like_input(ctx, 1, 0);
        like_input(ctx, 2, 1);
        like_input(ctx, 2, 2);
      });
  out.push_back(std::move(bn));

  OpSchema ln = grad_schema("LayerNormalizationGrad",
                            "Gradients of LayerNormalization (statistics recomputed from X).");
  ln.Input(0, "dY", "Gradient of the normalized output.", "T")
      .Input(1, "X", "LayerNormalization's input.", "T")
      .Input(2, "Scale", "LayerNormalization's scale.", "T")
      .Output(0, "dX", "Gradient of X.", "T")
      .Output(1, "dScale", "Gradient of Scale.", "T", OpSchema::Optional)
      .Output(2, "dB", "Gradient of B.", "T", OpSchema::Optional)
      .Attr("axis", "As LayerNormalization's.", AttributeProto::INT, static_cast<int64_t>(-1))
      .Attr("epsilon", "As LayerNormalization's.", AttributeProto::FLOAT, 1e-5f)
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        like_input(ctx, 1, 0);
        like_input(ctx, 2, 1);
        like_input(ctx, 2, 2);
      });
  out.push_back(std::move(ln));

  OpSchema softmax = grad_schema("SoftmaxGrad", "Gradient of Softmax: dX = Y (dY - sum(dY Y)) along the axis.");
  softmax.Input(0, "dY", "Gradient of Softmax's output.", "T")
      .Input(1, "Y", "Softmax's output.", "T")
      .Output(0, "dX", "Gradient of Softmax's input.", "T")
      .Attr("axis", "As Softmax's (opset 13).", AttributeProto::INT, static_cast<int64_t>(-1))
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { like_input(ctx, 1, 0); });
  out.push_back(std::move(softmax));

  // ONNX has Gelu from opset 20 on; this project stops at 17, so its own domain carries the op,
  // with opset 20's attribute. Recognised in exported graphs (passes/fusion/recognize_gelu.h).
  OpSchema gelu = grad_schema("Gelu",
                              "Gaussian error linear unit, as ONNX's Gelu (opset 20): Y = X/2 (1 + erf(X/sqrt 2)), "
                              "or with approximate=tanh Y = X/2 (1 + tanh(sqrt(2/pi) (X + 0.044715 X^3))).");
  gelu.Input(0, "X", "Input.", "T")
      .Output(0, "Y", "Output.", "T")
      .Attr("approximate", "none (exact, erf) or tanh.", AttributeProto::STRING, std::string("none"))
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { like_input(ctx, 0, 0); });
  out.push_back(std::move(gelu));

  OpSchema gelu_grad = grad_schema("GeluGrad", "Gradient of Gelu: dX = dY gelu'(X).");
  gelu_grad.Input(0, "dY", "Gradient of Gelu's output.", "T")
      .Input(1, "X", "Gelu's input.", "T")
      .Output(0, "dX", "Gradient of X.", "T")
      .Attr("approximate", "As Gelu's.", AttributeProto::STRING, std::string("none"))
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { like_input(ctx, 1, 0); });
  out.push_back(std::move(gelu_grad));

  // ONNX has Attention from opset 23 (4-D Q, K, V; is_causal upper-left aligned; a bool mask true
  // where a key takes part, a float mask added to the scores; scale 1/sqrt(head size) by default).
  // This project stops at opset 17, so its own domain carries it, in that 4-D form generalised to
  // any leading dims, with the softmax's row log-sum-exp as a second output for the gradient.
  // Recognised in exported graphs (passes/fusion/recognize_attention.h).
  OpSchema attention = grad_schema(
      "Attention",
      "Scaled dot-product attention, as ONNX's Attention (opset 23) over Q [..., Tq, d], K [..., Tk, d] and "
      "V [..., Tk, dv] with equal leading dims: Y = softmax(scale Q K^T + mask) V, the mask -inf where a bool "
      "attn_mask is false or, with is_causal, where key j > query i; a float attn_mask is added. LSE is each "
      "row's log(sum(exp(scale Q K^T + mask))), what the gradient recomputes the probabilities from.");
  attention.Input(0, "Q", "Queries [..., Tq, d].", "T")
      .Input(1, "K", "Keys [..., Tk, d].", "T")
      .Input(2, "V", "Values [..., Tk, dv].", "T")
      .Input(3, "attn_mask", "Broadcast to [..., Tq, Tk]: bool (true: attend) or float (added).", "U",
             OpSchema::Optional)
      .Output(0, "Y", "[..., Tq, dv].", "T")
      .Output(1, "LSE", "Row log-sum-exp [..., Tq] (float32; float64 for float64 inputs).", "T2", OpSchema::Optional)
      .Attr("scale", "Factor of Q K^T (default 1/sqrt(d)).", AttributeProto::FLOAT, false)
      .Attr("is_causal", "1: key j > query i takes no part.", AttributeProto::INT, static_cast<int64_t>(0))
      .TypeConstraint("U", {"tensor(bool)", "tensor(float16)", "tensor(bfloat16)", "tensor(float)", "tensor(double)"},
                      "Mask types.")
      .TypeConstraint("T2", {"tensor(float)", "tensor(double)"}, "Log-sum-exp types.")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
        if (onnx::hasInputShape(ctx, 0) && onnx::hasInputShape(ctx, 2)) {
          onnx::TensorShapeProto y = onnx::getInputShape(ctx, 0);
          const auto& v = onnx::getInputShape(ctx, 2);
          if (y.dim_size() >= 2 && v.dim_size() >= 1) *y.mutable_dim(y.dim_size() - 1) = v.dim(v.dim_size() - 1);
          onnx::updateOutputShape(ctx, 0, y);
        }
        if (ctx.getNumOutputs() > 1) {
          const int32_t t = ctx.getInputType(0)->tensor_type().elem_type();
          onnx::updateOutputElemType(ctx, 1, t == onnx::TensorProto::DOUBLE ? t : onnx::TensorProto::FLOAT);
          if (onnx::hasInputShape(ctx, 0)) {
            onnx::TensorShapeProto lse = onnx::getInputShape(ctx, 0);
            lse.mutable_dim()->RemoveLast();
            onnx::updateOutputShape(ctx, 1, lse);
          }
        }
      });
  out.push_back(std::move(attention));

  OpSchema attention_grad = grad_schema(
      "AttentionGrad",
      "Gradients of Attention from dY, recomputing the probabilities block by block from the saved LSE "
      "(FlashAttention's backward): dQ, dK, dV and, for a float attn_mask, the mask's gradient.");
  attention_grad.Input(0, "dY", "Gradient of Y.", "T")
      .Input(1, "Q", "Attention's Q.", "T")
      .Input(2, "K", "Attention's K.", "T")
      .Input(3, "V", "Attention's V.", "T")
      .Input(4, "Y", "Attention's Y.", "T")
      .Input(5, "LSE", "Attention's LSE.", "T2")
      .Input(6, "attn_mask", "Attention's attn_mask.", "U", OpSchema::Optional)
      .Output(0, "dQ", "Gradient of Q.", "T", OpSchema::Optional)
      .Output(1, "dK", "Gradient of K.", "T", OpSchema::Optional)
      .Output(2, "dV", "Gradient of V.", "T", OpSchema::Optional)
      .Output(3, "dMask", "Gradient of a float attn_mask.", "U", OpSchema::Optional)
      .Attr("scale", "As Attention's.", AttributeProto::FLOAT, false)
      .Attr("is_causal", "As Attention's.", AttributeProto::INT, static_cast<int64_t>(0))
      .TypeConstraint("U", {"tensor(bool)", "tensor(float16)", "tensor(bfloat16)", "tensor(float)", "tensor(double)"},
                      "Mask types.")
      .TypeConstraint("T2", {"tensor(float)", "tensor(double)"}, "Log-sum-exp types.")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        for (size_t k = 0; k < 3; ++k) like_input(ctx, k + 1, k);
        if (ctx.getNumInputs() > 6) like_input(ctx, 6, 3);
      });
  out.push_back(std::move(attention_grad));

  // ONNX's bitwise ops (opset 18; graph/onnx_newer_opsets.cc carries them here): numpy's
  // bitwise_and / or / xor with multidirectional broadcasting, and bitwise_not.
  const std::vector<std::string> integer_types = {"tensor(uint8)", "tensor(uint16)", "tensor(uint32)", "tensor(uint64)",
                                                  "tensor(int8)",  "tensor(int16)",  "tensor(int32)",  "tensor(int64)"};
  for (const char* name : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"}) {
    OpSchema s;
    s.SetName(name).SetDomain(kAmpDomain).SinceVersion(kAmpDomainVersion).SetLocation(__FILE__, __LINE__);
    s.SetDoc(std::string("ONNX's ") + name + " (opset 18): the elementwise bitwise operation on integers, with "
             "numpy-style broadcasting.")
        .Input(0, "A", "First input operand for the bitwise operator.", "T")
        .Input(1, "B", "Second input operand for the bitwise operator.", "T")
        .Output(0, "C", "Result tensor.", "T")
        .TypeConstraint("T", integer_types, "Constrain input to integer tensors.")
        .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
          onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
          if (onnx::hasNInputShapes(ctx, 2))
            onnx::bidirectionalBroadcastShapeInference(ctx.getInputType(0)->tensor_type().shape(),
                                                       ctx.getInputType(1)->tensor_type().shape(),
                                                       *ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape());
        });
    out.push_back(std::move(s));
  }
  OpSchema bitwise_not;
  bitwise_not.SetName("BitwiseNot").SetDomain(kAmpDomain).SinceVersion(kAmpDomainVersion);
  bitwise_not.SetLocation(__FILE__, __LINE__)
      .SetDoc("ONNX's BitwiseNot (opset 18): the elementwise bitwise not of an integer tensor.")
      .Input(0, "X", "Input tensor", "T")
      .Output(0, "Y", "Output tensor.", "T")
      .TypeConstraint("T", integer_types, "Constrain input/output to integer tensors.")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { onnx::propagateShapeAndTypeFromFirstInput(ctx); });
  out.push_back(std::move(bitwise_not));

  // ScatterElements and ScatterND as opset 18 defines them: opset 16's with reductions max and min
  // added (none, add, mul, max, min). The import carries a node with max or min here.
  const std::string scatter_reductions =
      "How updates combine with the data: none (replace; the default), add, mul, max or min. With a repeated "
      "index, none keeps the last update and the others combine every update in turn.";
  OpSchema scatter_elements;
  scatter_elements.SetName("ScatterElements").SetDomain(kAmpDomain).SinceVersion(kAmpDomainVersion);
  scatter_elements.SetLocation(__FILE__, __LINE__)
      .SetDoc("ONNX's ScatterElements (opset 18): a copy of data where each updates[p] is written (or combined, "
              "as the reduction says) at p with its axis coordinate replaced by indices[p].")
      .Attr("axis", "Which axis to scatter on; negative counts from the back.", AttributeProto::INT,
            static_cast<int64_t>(0))
      .Attr("reduction", scatter_reductions, AttributeProto::STRING, std::string("none"))
      .Input(0, "data", "Tensor of rank r >= 1.", "T")
      .Input(1, "indices", "Tensor of int32/int64 indices, of rank r.", "Tind")
      .Input(2, "updates", "Tensor of rank r, of the indices' shape.", "T")
      .Output(0, "output", "Tensor of the data's shape.", "T")
      .TypeConstraint("T", OpSchema::all_tensor_types_with_bfloat(),
                      "Input and output types can be of any tensor type.")
      .TypeConstraint("Tind", kIndexTypes, "Constrain indices to integer types")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { onnx::propagateShapeAndTypeFromFirstInput(ctx); });
  out.push_back(std::move(scatter_elements));
  OpSchema scatter_nd;
  scatter_nd.SetName("ScatterND").SetDomain(kAmpDomain).SinceVersion(kAmpDomainVersion);
  scatter_nd.SetLocation(__FILE__, __LINE__)
      .SetDoc("ONNX's ScatterND (opset 18): a copy of data where each index tuple indices[..., :k] writes (or "
              "combines, as the reduction says) its slice of updates.")
      .Attr("reduction", scatter_reductions, AttributeProto::STRING, std::string("none"))
      .Input(0, "data", "Tensor of rank r >= 1.", "T")
      .Input(1, "indices", "Tensor of rank q >= 1.", "tensor(int64)")
      .Input(2, "updates", "Tensor of rank q + r - indices_shape[-1] - 1.", "T")
      .Output(0, "output", "Tensor of rank r >= 1.", "T")
      .TypeConstraint("T", OpSchema::all_tensor_types_with_bfloat(),
                      "Constrain input and output types to any tensor type.")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { onnx::propagateShapeAndTypeFromFirstInput(ctx); });
  out.push_back(std::move(scatter_nd));
  // Ops that ONNX added after opset 17, with ONNX's definitions (this build's ONNX stops at 17):
  // the import carries such nodes into this domain under their own names (graph/onnx_newer_opsets.cc).
  // DeformConv (opset 19; bfloat16 from opset 22), 2-D here as torchvision's deform_conv2d.
  OpSchema deform_conv = grad_schema(
      "DeformConv",
      "Deformable convolution as ONNX's DeformConv (opset 19): each kernel tap of each output pixel reads X "
      "bilinearly at its place shifted by offset (zero outside X), times mask, then a grouped convolution.");
  deform_conv.Input(0, "X", "Input [N, C, H, W].", "T")
      .Input(1, "W", "Weight [oC, C/group, kH, kW].", "T")
      .Input(2, "offset", "Offsets [N, offset_group * kH * kW * 2, oH, oW] (dy, dx per tap).", "T")
      .Input(3, "B", "Bias [oC] (default zeros).", "T", OpSchema::Optional)
      .Input(4, "mask", "Tap weights [N, offset_group * kH * kW, oH, oW] (default ones).", "T", OpSchema::Optional)
      .Output(0, "Y", "Output [N, oC, oH, oW].", "T");
  deform_conv_attributes(deform_conv);
  deform_conv.TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
    onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
    if (!onnx::hasInputShape(ctx, 0) || !onnx::hasInputShape(ctx, 1)) return;
    const auto &x = onnx::getInputShape(ctx, 0), &w = onnx::getInputShape(ctx, 1);
    if (x.dim_size() < 3 || w.dim_size() != x.dim_size()) fail_shape_inference("DeformConv needs X and W of one rank >= 3");
    const size_t spatial = static_cast<size_t>(x.dim_size() - 2);
    auto ints = [&](const char* name, int64_t fill, size_t count) {
      std::vector<int64_t> v;
      if (const AttributeProto* a = ctx.getAttribute(name)) v.assign(a->ints().begin(), a->ints().end());
      if (v.empty()) v.assign(count, fill);
      if (v.size() != count) fail_shape_inference("DeformConv's ", name, " has ", v.size(), " values, not ", count);
      return v;
    };
    const std::vector<int64_t> strides = ints("strides", 1, spatial), dilations = ints("dilations", 1, spatial),
                               pads = ints("pads", 0, 2 * spatial);
    std::vector<int64_t> kernel;
    if (const AttributeProto* a = ctx.getAttribute("kernel_shape")) kernel.assign(a->ints().begin(), a->ints().end());
    onnx::TensorShapeProto y;
    *y.add_dim() = x.dim(0);
    *y.add_dim() = w.dim(0);
    for (size_t d = 0; d < spatial; ++d) {
      const auto& in = x.dim(static_cast<int>(d + 2));
      const auto& k = w.dim(static_cast<int>(d + 2));
      auto* out = y.add_dim();
      if (!in.has_dim_value() || (kernel.empty() && !k.has_dim_value())) continue;
      const int64_t extent = kernel.empty() ? k.dim_value() : kernel.at(d);
      const int64_t span = dilations[d] * (extent - 1) + 1;
      out->set_dim_value((in.dim_value() + pads[d] + pads[d + spatial] - span) / strides[d] + 1);
    }
    onnx::updateOutputShape(ctx, 0, y);
  });
  out.push_back(std::move(deform_conv));

  // Col2Im (opset 18): the sum of sliding blocks back into an image, as torch.nn.functional.fold.
  OpSchema col2im;
  col2im.SetName("Col2Im").SetDomain(kAmpDomain).SinceVersion(kAmpDomainVersion).SetLocation(__FILE__, __LINE__);
  col2im
      .SetDoc("Rearranges column blocks back into a multidimensional image, as ONNX's Col2Im (opset 18): "
              "overlapping values are summed.")
      .Input(0, "input", "Blocks [N, C * prod(block_shape), L].", "T")
      .Input(1, "image_shape", "The image's spatial extents.", "tensor(int64)")
      .Input(2, "block_shape", "The block's spatial extents.", "tensor(int64)")
      .Output(0, "output", "Image [N, C, image_shape...].", "T")
      .TypeConstraint("T", OpSchema::all_tensor_types_with_bfloat(), "Any tensor type.");
  sliding_block_attributes(col2im);
  col2im.TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
    onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
    bool found = false;
    const onnx::TensorShapeProto image = onnx::getShapeInput(ctx, 1, found);
    if (!found || !onnx::hasInputShape(ctx, 0)) return;
    const auto& in = onnx::getInputShape(ctx, 0);
    if (in.dim_size() != 3) fail_shape_inference("Col2Im's input must be [N, C * prod(block_shape), L]");
    onnx::TensorShapeProto y;
    *y.add_dim() = in.dim(0);
    auto* channels = y.add_dim();
    const onnx::TensorProto* block = ctx.getInputData(2);
    if (block && in.dim(1).has_dim_value()) {
      int64_t size = 1;
      for (int64_t b : onnx::ParseData<int64_t>(block)) size *= b;
      if (size <= 0 || in.dim(1).dim_value() % size != 0)
        fail_shape_inference("Col2Im's input channels are not a multiple of prod(block_shape)");
      channels->set_dim_value(in.dim(1).dim_value() / size);
    }
    for (const auto& d : image.dim()) *y.add_dim() = d;
    onnx::updateOutputShape(ctx, 0, y);
  });
  out.push_back(std::move(col2im));

  // The recurrent layers' gradients: the forward run again, its steps walked back (backpropagation
  // through time). Inputs: the gradients of the forward's outputs, then the forward's inputs.
  struct RecurrentGrad {
    const char* op;
    bool lstm;
  };
  for (const RecurrentGrad r : {RecurrentGrad{"LSTMGrad", true}, RecurrentGrad{"GRUGrad", false}, RecurrentGrad{"RNNGrad", false}}) {
    const std::string forward = std::string(r.op).substr(0, std::string(r.op).size() - 4);
    OpSchema s = grad_schema(r.op, ("Gradients of " + forward + " with respect to its inputs, from the gradients of its "
                                    "outputs (any may be absent), by running the layer again and walking its steps back.")
                                       .c_str());
    const int first = r.lstm ? 3 : 2;  // dY, dY_h (, dY_c), then the forward's inputs
    s.Input(0, "dY", "Gradient of Y.", "T", OpSchema::Optional);
    s.Input(1, "dY_h", "Gradient of Y_h.", "T", OpSchema::Optional);
    if (r.lstm) s.Input(2, "dY_c", "Gradient of Y_c.", "T", OpSchema::Optional);
    s.Input(first, "X", "The forward's X.", "T");
    s.Input(first + 1, "W", "The forward's W.", "T");
    s.Input(first + 2, "R", "The forward's R.", "T");
    s.Input(first + 3, "B", "The forward's B.", "T", OpSchema::Optional);
    s.Input(first + 4, "sequence_lens", "The forward's sequence_lens.", "tensor(int32)", OpSchema::Optional);
    s.Input(first + 5, "initial_h", "The forward's initial_h.", "T", OpSchema::Optional);
    if (r.lstm) {
      s.Input(first + 6, "initial_c", "The forward's initial_c.", "T", OpSchema::Optional);
      s.Input(first + 7, "P", "The forward's P.", "T", OpSchema::Optional);
    }
    const std::vector<const char*> outputs = r.lstm ? std::vector<const char*>{"dX", "dW", "dR", "dB", "d_initial_h", "d_initial_c", "dP"}
                                                    : std::vector<const char*>{"dX", "dW", "dR", "dB", "d_initial_h"};
    for (size_t o = 0; o < outputs.size(); ++o)
      s.Output(static_cast<int>(o), outputs[o], "Gradient of the forward input of that name.", "T", OpSchema::Optional);
    s.Attr("hidden_size", "As the forward's.", AttributeProto::INT, false)
        .Attr("direction", "As the forward's.", AttributeProto::STRING, std::string("forward"))
        .Attr("activations", "As the forward's.", AttributeProto::STRINGS, false)
        .Attr("activation_alpha", "As the forward's.", AttributeProto::FLOATS, false)
        .Attr("activation_beta", "As the forward's.", AttributeProto::FLOATS, false)
        .Attr("clip", "As the forward's.", AttributeProto::FLOAT, false)
        .Attr("layout", "As the forward's.", AttributeProto::INT, static_cast<int64_t>(0));
    if (r.lstm) s.Attr("input_forget", "As LSTM's.", AttributeProto::INT, static_cast<int64_t>(0));
    if (forward == "GRU") s.Attr("linear_before_reset", "As GRU's.", AttributeProto::INT, static_cast<int64_t>(0));
    // Output k is like forward input k (X, W, R, B, initial_h, initial_c, P).
    const std::vector<int> like = r.lstm ? std::vector<int>{0, 1, 2, 3, 5, 6, 7} : std::vector<int>{0, 1, 2, 3, 5};
    s.TypeAndShapeInferenceFunction([first, like](InferenceContext& ctx) {
      for (size_t k = 0; k < like.size() && k < ctx.getNumOutputs(); ++k) {
        const size_t in = static_cast<size_t>(first + like[k]);
        if (in < ctx.getNumInputs() && ctx.getInputType(in)) like_input(ctx, in, k);
      }
    });
    out.push_back(std::move(s));
  }

  out.push_back(loss_grad_schema("SoftmaxCrossEntropyLossGrad",
                                 "Gradient of SoftmaxCrossEntropyLoss with respect to scores: (softmax - onehot) "
                                 "times dLoss and the label weights, divided as the reduction says.",
                                 {"dLoss", "Gradient of the loss (a scalar unless reduction is none)."},
                                 {"scores", "The forward op's scores [N,C,...]."}, {"labels", "The forward op's labels [N,...]."},
                                 {"weights", "The forward op's class weights [C]."}, {"dScores", "Gradient of scores."}));
  out.push_back(loss_grad_schema("NegativeLogLikelihoodLossGrad",
                                 "Gradient of NegativeLogLikelihoodLoss with respect to its input.",
                                 {"dLoss", "Gradient of the loss."}, {"input", "The forward op's input [N,C,...]."},
                                 {"target", "The forward op's target [N,...]."},
                                 {"weight", "The forward op's class weights [C]."}, {"dInput", "Gradient of input."}));

  OpSchema gather = grad_schema("GatherGrad",
                                "Gradient of Gather's data: dY scatter-added into zeros of the data's shape "
                                "(repeated indices accumulate).");
  gather.Input(0, "dY", "Gradient of Gather's output.", "T")
      .Input(1, "shape", "Shape of Gather's data.", "tensor(int64)")
      .Input(2, "indices", "Gather's indices.", "Tind")
      .Output(0, "dData", "Gradient of data.", "T")
      .Attr("axis", "As Gather's.", AttributeProto::INT, static_cast<int64_t>(0))
      .TypeConstraint("Tind", kIndexTypes, "Index types.")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { shape_from_input(ctx, 0, 1); });
  out.push_back(std::move(gather));

  OpSchema slice = grad_schema("SliceGrad", "Gradient of Slice's data: dY placed into zeros of the data's shape.");
  slice.Input(0, "dY", "Gradient of Slice's output.", "T")
      .Input(1, "shape", "Shape of Slice's data.", "tensor(int64)")
      .Input(2, "starts", "As Slice's.", "Tind")
      .Input(3, "ends", "As Slice's.", "Tind")
      .Input(4, "axes", "As Slice's.", "Tind", OpSchema::Optional)
      .Input(5, "steps", "As Slice's.", "Tind", OpSchema::Optional)
      .Output(0, "dData", "Gradient of data.", "T")
      .TypeConstraint("Tind", kIndexTypes, "Index types.")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { shape_from_input(ctx, 0, 1); });
  out.push_back(std::move(slice));

  OpSchema pad_grad = grad_schema("PadGrad",
                                  "Gradient of a reflect, edge or wrap Pad: each element of dY added into the "
                                  "element of the data it was read from.");
  pad_grad.Input(0, "dY", "Gradient of Pad's output.", "T")
      .Input(1, "pads", "As Pad's.", "tensor(int64)")
      .Input(2, "shape", "Shape of Pad's data.", "tensor(int64)")
      .Input(3, "axes", "As Pad's.", "Tind", OpSchema::Optional)
      .Output(0, "dData", "Gradient of data.", "T")
      .Attr("mode", "As Pad's: reflect, edge or wrap.", AttributeProto::STRING, std::string("reflect"))
      .TypeConstraint("Tind", kIndexTypes, "Index types.")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { shape_from_input(ctx, 0, 2); });
  out.push_back(std::move(pad_grad));

  OpSchema resize_grad = grad_schema("ResizeGrad",
                                     "Gradient of Resize's X (nearest, linear or cubic): each element of dY, times "
                                     "the weights it was interpolated with, added into the elements it read.");
  resize_grad.Input(0, "dY", "Gradient of Resize's output.", "T")
      .Input(1, "shape", "Shape of Resize's X.", "tensor(int64)")
      .Input(2, "scales", "Resize's scales (empty when it had sizes).", "tensor(float)", OpSchema::Optional)
      .Output(0, "dX", "Gradient of X.", "T")
      .Attr("mode", "As Resize's.", AttributeProto::STRING, std::string("nearest"))
      .Attr("coordinate_transformation_mode", "As Resize's.", AttributeProto::STRING, std::string("half_pixel"))
      .Attr("nearest_mode", "As Resize's.", AttributeProto::STRING, std::string("round_prefer_floor"))
      .Attr("cubic_coeff_a", "As Resize's.", AttributeProto::FLOAT, -0.75f)
      .Attr("exclude_outside", "As Resize's.", AttributeProto::INT, static_cast<int64_t>(0))
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { shape_from_input(ctx, 0, 1); });
  out.push_back(std::move(resize_grad));

  OpSchema roi_align_grad = grad_schema("RoiAlignGrad",
                                        "Gradient of RoiAlign's X: each element of dY goes to the feature-map "
                                        "elements its bin sampled, with their bilinear weights (mode avg: over the "
                                        "bin's sample count; mode max: the one term the forward took, which needs X).");
  roi_align_grad.Input(0, "dY", "Gradient of RoiAlign's output.", "T")
      .Input(1, "rois", "As RoiAlign's.", "T")
      .Input(2, "batch_indices", "As RoiAlign's.", "tensor(int64)")
      .Input(3, "shape", "Shape of RoiAlign's X.", "tensor(int64)")
      .Input(4, "X", "RoiAlign's X (mode max).", "T", OpSchema::Optional)
      .Output(0, "dX", "Gradient of X.", "T")
      .Attr("mode", "As RoiAlign's.", AttributeProto::STRING, std::string("avg"))
      .Attr("coordinate_transformation_mode", "As RoiAlign's.", AttributeProto::STRING, std::string("half_pixel"))
      .Attr("output_height", "As RoiAlign's.", AttributeProto::INT, static_cast<int64_t>(1))
      .Attr("output_width", "As RoiAlign's.", AttributeProto::INT, static_cast<int64_t>(1))
      .Attr("sampling_ratio", "As RoiAlign's.", AttributeProto::INT, static_cast<int64_t>(0))
      .Attr("spatial_scale", "As RoiAlign's.", AttributeProto::FLOAT, 1.0f)
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { shape_from_input(ctx, 0, 3); });
  out.push_back(std::move(roi_align_grad));

  OpSchema grid_sample_grad =
      grad_schema("GridSampleGrad",
                  "Gradients of GridSample's X and grid: each element of dY, times the weights of the taps it "
                  "read, added into those elements of X; the grid's, the weights' derivative along the sampled "
                  "coordinate times X's values there, summed over channels (mode nearest: 0), times the "
                  "unnormalization's and (bilinear, nearest) the padding's slope.");
  grid_sample_grad.Input(0, "dY", "Gradient of GridSample's output.", "T")
      .Input(1, "X", "GridSample's X.", "T")
      .Input(2, "grid", "GridSample's grid.", "T2")
      .Output(0, "dX", "Gradient of X.", "T", OpSchema::Optional)
      .Output(1, "dgrid", "Gradient of the grid.", "T2", OpSchema::Optional)
      .TypeConstraint("T2", kFloatTypes, "The grid's floating-point type.")
      .Attr("mode", "As GridSample's.", AttributeProto::STRING, std::string("bilinear"))
      .Attr("padding_mode", "As GridSample's.", AttributeProto::STRING, std::string("zeros"))
      .Attr("align_corners", "As GridSample's.", AttributeProto::INT, static_cast<int64_t>(0))
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        like_input(ctx, 1, 0);
        like_input(ctx, 2, 1);
      });
  out.push_back(std::move(grid_sample_grad));

  OpSchema sum_to = grad_schema("SumToShape",
                                "Sums X over the axes along which a tensor of the given shape was broadcast to "
                                "X's shape (numpy rules): the gradient of a broadcast input when shapes are only "
                                "known at run time.");
  sum_to.Input(0, "X", "Gradient of the broadcast result.", "T")
      .Input(1, "shape", "Shape of the broadcast input.", "tensor(int64)")
      .Output(0, "Y", "X summed down to `shape`.", "T")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { shape_from_input(ctx, 0, 1); });
  out.push_back(std::move(sum_to));

  out.push_back(all_finite_schema("AllFinite",
                                  "True when no element of any input is inf or NaN: the one overflow check over all "
                                  "gradients of a mixed-precision step.",
                                  false));
  out.push_back(all_finite_schema("AllFiniteScaled",
                                  "True when no x * scale, over every element x of every input, is inf or NaN, the "
                                  "product taken in float32: AllFinite of the unscaled gradients, read before they "
                                  "are unscaled. The check then needs none of the unscaled values, so a backend can "
                                  "unscale inside the optimizer's kernel.",
                                  true));

  OpSchema all_reduce;
  all_reduce.SetName("AllReduce")
      .SetDomain(kAmpDomain)
      .SinceVersion(kAmpDomainVersion)
      .SetLocation(__FILE__, __LINE__)
      .SetDoc("The mean of each input over the processes of a data-parallel run (the replicas, each on its own "
              "batch): output i = (sum over ranks of input i) / ranks, summed in float32 at least and rounded once "
              "to the input's type, the same bits on every rank. One node is one bucket: its inputs go in one "
              "collective. With `reduce` given and false, nothing is exchanged and each output is its input (the "
              "micro-batches of gradient accumulation before the last); every rank passes the same `reduce`. In "
              "a single process, each output is its input.")
      .Input(0, "reduce", "Scalar bool: exchange this run (absent: always).", "tensor(bool)", OpSchema::Optional)
      .Input(1, "inputs", "This rank's tensors.", "T", OpSchema::Variadic, false)
      .Output(0, "outputs", "Their means over the ranks, one per input, of its type and shape.", "T",
              OpSchema::Variadic, false)
      .TypeConstraint("T", kFloatTypes, "Floating-point tensors.")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        for (size_t i = 0; i < ctx.getNumOutputs() && i + 1 < ctx.getNumInputs(); ++i) like_input(ctx, i + 1, i);
      });
  out.push_back(std::move(all_reduce));
  return out;
}

}  // namespace

void register_amp_op_schemas() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance();
    if (!ranges.Map().count(kAmpDomain))
      ranges.AddDomainToVersion(kAmpDomain, kAmpDomainVersion, kAmpDomainVersion);
    for (OpSchema& s : schemas()) onnx::RegisterSchema(std::move(s));
  });
}

}  // namespace amp
