// Channels-last in the BatchNorm units (CudaOp::channels_last, channels_last.h): the plain
// BatchNormalization and BatchNormalizationGrad ops (normalization_ops.cc), the fused BatchNorm +
// ReLU units both ways (batch_norm_relu_fusion.h) and the convolutions that take a BatchNorm + ReLU
// inside (conv_batch_norm_fusion.h, through cuDNN's graphs and through their unfused fallback).
// Each unit, made by its matcher over a small graph, runs once with its listed operands stored
// NHWC (filters KRSC) and once NCHW on the same data (tests/support/channels_last_op.h): in fp16
// and bf16 the results agree within what 16-bit rounding allows (the statistics and the parameter
// gradients too, and the ReLU mask's bits element for element after mapping their order), and no
// unit lists anything for fp32 or for data of another rank (device-free). On a GPU, or in
// test_cuda_backend_emulated on the host stand-ins.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/model.h"
#include "tests/support/test_support.h"

#if AMP_HAVE_CUDA
#include <nlohmann/json.hpp>

#include "backends/cuda/batch_norm_relu_fusion.h"
#include "backends/cuda/conv_batch_norm_fusion.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/device_context.h"
#include "graph/amp_ops.h"
#include "tests/support/channels_last_op.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"
#include "tests/support/require_gpu.h"
#include "tests/support/scoped_env.h"
#endif

namespace amp {
namespace {

#if AMP_HAVE_CUDA

using test::random_tensor;

// A graph whose every value is typed with its static shape (as an export's shape inference leaves
// them), and the contents of its inputs and of the values computed so far, by name.
struct TypedGraph {
  Model m;
  std::map<std::string, Tensor> values;
  uint32_t seed = 1;

  TypedGraph() { m.opset_imports = {{"", 17}, {kAmpDomain, 1}}; }
  Graph& g() { return *m.graph; }
  // A graph input of random contents in [lo, hi).
  Value* input(const std::string& name, DType t, const std::vector<int64_t>& dims, float lo = -1.0f, float hi = 1.0f) {
    values[name] = random_tensor(t, dims, seed++, lo, hi);
    return g().add_input(name, ValueType::tensor(t, Shape::of(dims)));
  }
  // A node whose outputs are typed (types[k], dims[k]).
  Node* node(const std::string& op, std::vector<Value*> in, std::vector<std::string> out, std::vector<DType> types,
             std::vector<std::vector<int64_t>> dims, const std::string& domain = "") {
    Node* n = g().add_node(op, std::move(in), std::move(out), domain);
    for (size_t k = 0; k < n->outputs().size(); ++k)
      n->output(k)->set_type(ValueType::tensor(types[k], Shape::of(dims[k])));
    return n;
  }
  Value* zero(DType t) {
    Tensor z(t, {});
    if (t == DType::kFloat) *z.mutable_as<float>() = 0.0f;
    else *z.mutable_as<uint16_t>() = 0;  // +0 in fp16 and bf16
    Node* c = node("Constant", {}, {"zero"}, {t}, {{}});
    c->set_attr(Attribute::of_tensor("value", z));
    return c->output(0);
  }
};

std::vector<int64_t> static_dims(const Value* v) {
  std::vector<int64_t> d;
  for (const Dim& x : v->type().shape->dims) d.push_back(*x.value);
  return d;
}

// A unit's operand shapes as its matcher's values give them, row-major (for channels_last()).
struct UnitShapes {
  std::vector<cuda::TensorDesc> in, out;
  cuda::OpShapes shapes;
  UnitShapes(const cuda::UnitMatch& u) : in(u.inputs.size()), out(u.outputs.size()) {
    for (size_t i = 0; i < u.inputs.size(); ++i)
      if (u.inputs[i]) in[i] = {u.inputs[i]->dtype(), static_dims(u.inputs[i])};
    for (size_t k = 0; k < u.outputs.size(); ++k)
      if (u.outputs[k]) out[k] = {u.outputs[k]->dtype(), static_dims(u.outputs[k])};
    for (size_t i = 0; i < in.size(); ++i) {
      shapes.in.push_back(u.inputs[i] ? &in[i] : nullptr);
      shapes.host.push_back(nullptr);
    }
    for (size_t k = 0; k < out.size(); ++k) shapes.out.push_back(u.outputs[k] ? &out[k] : nullptr);
    for (size_t k = 0; k < out.size(); ++k)
      if (u.outputs[k]) out[k].packed_bytes = u.op->packed_output_bytes(shapes, k);
  }
};

// Runs unit u once on `values` (a packed input, the bits or the statistics, as the raw bytes its
// writer returned), NCHW or with the operands its op lists channels-last; its results by position.
std::vector<Tensor> run_unit(const cuda::UnitMatch& u, const std::map<std::string, Tensor>& values, bool channels_last,
                             cuda::DeviceContext& ctx) {
  const UnitShapes us(u);
  std::vector<const Tensor*> in;
  for (const Value* v : u.inputs) in.push_back(v ? &values.at(v->name()) : nullptr);
  cuda::ChannelsLastOperands layout;
  if (channels_last) {
    layout = u.op->channels_last(us.shapes);
    EXPECT_TRUE(layout.any()) << u.nodes.front()->op_type() << " lists nothing";
    // A packed input is handed over as the bytes its writer left, already in the order the unit
    // computes in (the harness transposes only what has dims to transpose).
    for (size_t i = 0; i < in.size() && i < layout.in.size(); ++i)
      if (in[i] && in[i]->dtype == DType::kUInt8) layout.in[i] = false;
  }
  std::vector<cuda::TensorDesc> outs = us.out;
  for (size_t k = 0; k < outs.size(); ++k)
    if (!u.outputs[k]) outs[k].dtype = DType::kUndefined;
  return test::run_cuda_op(*u.op, ctx, in, outs, layout);
}

// The units of g found by `match`, in the graph's order.
std::vector<cuda::UnitMatch> units_of(const Graph& g, cuda::UnitMatcher match) {
  return match(g, [](const Node*) { return false; });
}

// Raw bytes as fp32 values.
Tensor as_floats(const Tensor& raw) {
  Tensor f(DType::kFloat, {static_cast<int64_t>(raw.nbytes() / 4)});
  std::memcpy(f.mutable_data(), raw.data(), f.nbytes());
  return f;
}

// fp32 results summed from 16-bit values (statistics, parameter gradients) differ by what their
// terms' rounding allows: the tolerance of 16-bit data (parity.h), in fp32's units.
double sums_scale(DType t) { return 2.0 * (t == DType::kFloat16 ? 2e-3 : 1.6e-2) / 1e-4; }

// The ReLU mask's bits of [N, C, spatial] elements, NCHW order against NHWC order: the elements
// whose bit differs.
size_t differing_bits(const Tensor& nchw, const Tensor& nhwc, const std::vector<int64_t>& dims) {
  const int64_t n = dims[0], c = dims[1], plane = dims[2] * dims[3];
  const uint8_t* a = nchw.data();
  const uint8_t* b = nhwc.data();
  auto bit = [](const uint8_t* bits, int64_t i) {
    return (reinterpret_cast<const uint32_t*>(bits)[i / 32] >> (i % 32)) & 1u;
  };
  size_t differ = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < plane; ++p)
        differ += bit(a, (i * c + k) * plane + p) != bit(b, (i * plane + p) * c + k);
  return differ;
}


// A training-mode BatchNormalization of x (dims) in tg, its per-channel inputs named with suffix s.
Node* batch_norm_node(TypedGraph& tg, DType t, Value* x, const std::string& s, const std::vector<int64_t>& dims) {
  const std::vector<int64_t> ch{dims[1]};
  const DType f = DType::kFloat;
  Node* bn = tg.node("BatchNormalization",
                     {x, tg.input("scale" + s, f, ch, 0.5f, 2.0f), tg.input("bias" + s, f, ch),
                      tg.input("mean" + s, f, ch), tg.input("var" + s, f, ch, 0.5f, 2.0f)},
                     {"bn" + s, "running_mean" + s, "running_var" + s}, {t, f, f}, {dims, ch, ch});
  bn->set_attr(Attribute::of_int("training_mode", 1));
  bn->set_attr(Attribute::of_float("momentum", 0.8f));
  return bn;
}

// y = Relu(BatchNormalization(x) [+ z]) with g = Where(Greater(y, 0), dY, 0) and
// BatchNormalizationGrad(g, x, scale), g also read by a Neg; `summed`: dY the Add of two
// gradients; `shortcut`: z = BatchNormalization(x2) with its gradient from g (no Neg).
TypedGraph bn_relu_layer(DType t, const std::vector<int64_t>& dims, bool residual, bool summed, bool shortcut) {
  TypedGraph tg;
  const std::vector<int64_t> ch{dims[1]};
  const DType f = DType::kFloat;
  auto batch_norm = [&](Value* x, const std::string& s) { return batch_norm_node(tg, t, x, s, dims); };
  // x away from 0 on average: the statistics must not depend on a small mean.
  Value* x = tg.input("x", t, dims, -1.0f, 4.0f);
  Node* bn = batch_norm(x, "");
  Node* bn2 = shortcut ? batch_norm(tg.input("x2", t, dims, -3.0f, 1.0f), "2") : nullptr;
  Value* dy = tg.input("dy", t, dims);
  if (summed) dy = tg.node("Add", {dy, tg.input("dy2", t, dims)}, {"dy_sum"}, {t}, {dims})->output(0);
  Value* pre = bn->output(0);
  if (residual)
    pre = tg.node("Add", {pre, shortcut ? bn2->output(0) : tg.input("z", t, dims)}, {"sum"}, {t}, {dims})->output(0);
  Value* y = tg.node("Relu", {pre}, {"y"}, {t}, {dims})->output(0);
  Value* zero = tg.zero(t);
  Value* mask = tg.node("Greater", {y, zero}, {"mask"}, {DType::kBool}, {dims})->output(0);
  Value* g = tg.node("Where", {mask, dy, zero}, {"g"}, {t}, {dims})->output(0);
  Node* grad = tg.node("BatchNormalizationGrad", {g, x, bn->input(1)}, {"dx", "dscale", "dbias"}, {t, f, f},
                       {dims, ch, ch}, kAmpDomain);
  Graph& gr = tg.g();
  for (Value* v : {y, bn->output(1), bn->output(2), grad->output(0), grad->output(1), grad->output(2)})
    gr.add_output(v);
  if (shortcut) {
    Node* grad2 = tg.node("BatchNormalizationGrad", {g, bn2->input(0), bn2->input(1)}, {"dx2", "dscale2", "dbias2"},
                          {t, f, f}, {dims, ch, ch}, kAmpDomain);
    for (Value* v : {bn2->output(1), bn2->output(2), grad2->output(0), grad2->output(1), grad2->output(2)})
      gr.add_output(v);
  } else {
    gr.add_output(tg.node("Neg", {g}, {"other_branch"}, {t}, {dims})->output(0));
  }
  return tg;
}

// A ResNet bottleneck's inner layers: x -> Conv1 -> BatchNorm1 -> Relu1 -> Conv2 (stride 2) ->
// BatchNorm2 -> Relu2 -> Conv3 (1x1), and their backward from dOut as autodiff writes it:
// ConvGrad3 -> Where(Greater(y2, 0)) -> BatchNormalizationGrad2 -> ConvGrad2 -> Where(Greater(y1,
// 0)) -> BatchNormalizationGrad1. No convolution has a bias.
TypedGraph conv_batch_norm_chain(DType t) {
  TypedGraph tg;
  const DType f = DType::kFloat;
  const int64_t n = 2, c0 = 8, c1 = 40, c2 = 24, c3 = 16;
  const std::vector<int64_t> xd{n, c0, 6, 6}, a1d{n, c1, 6, 6}, a2d{n, c2, 3, 3}, od{n, c3, 3, 3};
  auto conv = [&](Value* in, Value* w, const std::string& out, const std::vector<int64_t>& dims, int64_t pad,
                  int64_t stride) {
    Node* c = tg.node("Conv", {in, w}, {out}, {t}, {dims});
    c->set_attr(Attribute::of_ints("pads", {pad, pad, pad, pad}));
    c->set_attr(Attribute::of_ints("strides", {stride, stride}));
    return c;
  };
  auto conv_grad = [&](Value* dy, Value* x, Value* w, const std::string& s, const std::vector<int64_t>& xdims,
                       int64_t pad, int64_t stride) {
    Node* c = tg.node("ConvGrad", {dy, x, w}, {"dx" + s, "dw" + s}, {t, t}, {xdims, static_dims(w)}, kAmpDomain);
    c->set_attr(Attribute::of_ints("pads", {pad, pad, pad, pad}));
    c->set_attr(Attribute::of_ints("strides", {stride, stride}));
    return c;
  };
  auto bn_relu = [&](Value* a, const std::string& s, const std::vector<int64_t>& dims) {
    return batch_norm_node(tg, t, a, s, dims);
  };
  Value* zero = tg.zero(t);
  Value* x = tg.input("x", t, xd);
  Value* w1 = tg.input("w1", t, {c1, c0, 3, 3}, -0.25f, 0.25f);
  Value* w2 = tg.input("w2", t, {c2, c1, 3, 3}, -0.1f, 0.1f);
  Value* w3 = tg.input("w3", t, {c3, c2, 1, 1}, -0.25f, 0.25f);
  Value* a1 = conv(x, w1, "a1", a1d, 1, 1)->output(0);
  Node* bn1 = bn_relu(a1, "1", a1d);
  Value* y1 = tg.node("Relu", {bn1->output(0)}, {"y1"}, {t}, {a1d})->output(0);
  Value* a2 = conv(y1, w2, "a2", a2d, 1, 2)->output(0);
  Node* bn2 = bn_relu(a2, "2", a2d);
  Value* y2 = tg.node("Relu", {bn2->output(0)}, {"y2"}, {t}, {a2d})->output(0);
  Value* out = conv(y2, w3, "out", od, 0, 1)->output(0);
  Value* dout = tg.input("dout", t, od);
  Node* grad3 = conv_grad(dout, y2, w3, "3", a2d, 0, 1);
  Value* m2 = tg.node("Greater", {y2, zero}, {"mask2"}, {DType::kBool}, {a2d})->output(0);
  Value* g2 = tg.node("Where", {m2, grad3->output(0), zero}, {"g2"}, {t}, {a2d})->output(0);
  Node* bn_grad2 = tg.node("BatchNormalizationGrad", {g2, a2, bn2->input(1)}, {"da2", "dscale2", "dbias2"}, {t, f, f},
                           {a2d, {c2}, {c2}}, kAmpDomain);
  Node* grad2 = conv_grad(bn_grad2->output(0), y1, w2, "2", a1d, 1, 2);
  Value* m1 = tg.node("Greater", {y1, zero}, {"mask1"}, {DType::kBool}, {a1d})->output(0);
  Value* g1 = tg.node("Where", {m1, grad2->output(0), zero}, {"g1"}, {t}, {a1d})->output(0);
  Node* bn_grad1 = tg.node("BatchNormalizationGrad", {g1, a1, bn1->input(1)}, {"da1", "dscale1", "dbias1"}, {t, f, f},
                           {a1d, {c1}, {c1}}, kAmpDomain);
  Graph& gr = tg.g();
  for (Value* v : {out, bn1->output(1), bn1->output(2), bn2->output(1), bn2->output(2), grad3->output(1),
                   grad2->output(1), bn_grad2->output(1), bn_grad2->output(2), bn_grad1->output(0),
                   bn_grad1->output(1), bn_grad1->output(2)})
    gr.add_output(v);
  return tg;
}

// Runs `units` in an order their inputs allow, NCHW, keeping every result in tg.values; each unit
// also runs channels-last on the same inputs, its results compared with the NCHW ones. Packed
// results are the ReLU mask's bits (`bits`) or a BatchNorm's statistics: the bits of the
// channels-last run, in NHWC order, replace the NCHW ones as the input of its readers'
// channels-last runs (`cl_bits`); the statistics are per channel, the same either way.
void compare_units(TypedGraph& tg, const std::vector<cuda::UnitMatch>& units, bool bits, DType t,
                   cuda::DeviceContext& ctx) {
  std::map<std::string, Tensor> cl_bits;
  std::vector<bool> done(units.size(), false);
  for (size_t ran = 0; ran < units.size();) {
    size_t before = ran;
    for (size_t k = 0; k < units.size(); ++k) {
      if (done[k]) continue;
      const cuda::UnitMatch& u = units[k];
      bool ready = true;
      for (const Value* v : u.inputs) ready = ready && (!v || tg.values.count(v->name()));
      if (!ready) continue;
      const std::string kind = [&] {
        std::string s;
        for (const Node* n : u.nodes) s += (s.empty() ? "" : "+") + n->op_type();
        return s;
      }();
      SCOPED_TRACE(kind);
      const std::vector<Tensor> nchw = run_unit(u, tg.values, false, ctx);
      std::map<std::string, Tensor> cl_inputs = tg.values;
      for (const auto& [name, bytes] : cl_bits) cl_inputs[name] = bytes;
      const std::vector<Tensor> cl = run_unit(u, cl_inputs, true, ctx);
      const UnitShapes us(u);
      for (size_t o = 0; o < u.outputs.size(); ++o) {
        const Value* v = u.outputs[o];
        if (!v) continue;
        const std::string what = kind + " " + v->name();
        // Written in full (the harness fills outputs with NaN bytes), so that agreeing means something.
        if (!us.out[o].packed_bytes)
          for (int64_t i = 0; i < nchw[o].numel(); ++i)
            if (std::isnan(nchw[o].element(i))) {
              ADD_FAILURE() << what << "[" << i << "] is not written";
              break;
            }
        if (us.out[o].packed_bytes && bits) {
          // The mask's bits: y > 0 of results within rounding of each other; an element within
          // that rounding of 0 may take the other side.
          EXPECT_LE(differing_bits(nchw[o], cl[o], us.out[o].dims), 2u) << what;
          cl_bits[v->name()] = cl[o];
        } else if (us.out[o].packed_bytes) {  // the statistics, summed in another order
          test::expect_close(as_floats(cl[o]), as_floats(nchw[o]), what, sums_scale(t));
        } else if (v->dtype() == DType::kFloat) {  // statistics and parameter gradients
          test::expect_close(cl[o], nchw[o], what, sums_scale(t));
        } else {  // 16-bit data: a few ulps of its scale
          test::expect_close(cl[o], nchw[o], what, 4.0, 2);
        }
        tg.values[v->name()] = nchw[o];
      }
      done[k] = true;
      ++ran;
    }
    ASSERT_GT(ran, before) << "a unit's inputs are never made";
  }
}

// What the units list (device-free): for 16-bit [N, C, H, W] data every data operand (the mask's
// bits too, filters as KRSC), never a per-channel one or the packed statistics; nothing for fp32
// or for data of another rank, which keep ONNX's layout.
TEST(CudaSchedule, BatchNormUnitsListTheirDataChannelsLastFor16BitImagesOnly) {
  for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16})
    for (const std::vector<int64_t>& dims : {std::vector<int64_t>{2, 8, 5, 5}, std::vector<int64_t>{2, 8, 10}}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " rank " + std::to_string(dims.size()));
      const bool listed = t != DType::kFloat && dims.size() == 4;
      TypedGraph tg = bn_relu_layer(t, dims, true, true, true);
      const std::vector<cuda::UnitMatch> units = units_of(tg.g(), cuda::match_batch_norm_relu);
      ASSERT_EQ(units.size(), 2u);
      const cuda::ChannelsLastOperands forward = units[0].op->channels_last(UnitShapes(units[0]).shapes);
      const cuda::ChannelsLastOperands backward = units[1].op->channels_last(UnitShapes(units[1]).shapes);
      if (!listed) {
        EXPECT_FALSE(forward.any());
        EXPECT_FALSE(backward.any());
        continue;
      }
      // x, (z: absent), the shortcut's x; y, the bits.
      EXPECT_EQ(forward.in,
                (std::vector<bool>{true, false, false, false, false, false, true, false, false, false, false}));
      EXPECT_EQ(forward.out, (std::vector<bool>{true, false, false, true, false, false}));
      // dY, the bits, x, the second dY, the shortcut's x; dX, (Where's result: absent), the shortcut's dX.
      EXPECT_EQ(backward.in, (std::vector<bool>{true, true, true, false, true, true, false}));
      EXPECT_EQ(backward.out, (std::vector<bool>{true, false, false, false, true, false, false}));
    }
  for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(t));
    TypedGraph tg = conv_batch_norm_chain(t);
    const std::vector<cuda::UnitMatch> units = units_of(tg.g(), cuda::match_conv_batch_norm);
    if (t == DType::kFloat) {  // only 16-bit layers run inside the convolutions
      EXPECT_TRUE(units.empty());
      continue;
    }
    ASSERT_EQ(units.size(), 7u);
    for (const cuda::UnitMatch& u : units) {
      SCOPED_TRACE(u.nodes.front()->op_type());
      const cuda::ChannelsLastOperands cl = u.op->channels_last(UnitShapes(u).shapes);
      const std::string kind = u.nodes.front()->op_type();
      if (kind == "Conv") {  // X, W; Y. Not the statistics, scale, B, mean, var, nor their results.
        EXPECT_EQ(cl.in, (std::vector<bool>{true, true, false, false, false, false, false}));
        EXPECT_EQ(cl.out, (std::vector<bool>{true, false, false, false}));
      } else if (kind == "ConvGrad") {  // dY, x, W; dX, dW. Not the statistics, scale, B.
        EXPECT_EQ(cl.in, (std::vector<bool>{true, true, true, false, false, false}));
        EXPECT_EQ(cl.out, (std::vector<bool>{true, true, false}));
      } else {  // dY, x; dX. Not the statistics, scale, B.
        EXPECT_EQ(cl.in, (std::vector<bool>{true, false, true, false, false, false, false, false}));
        EXPECT_EQ(cl.out, (std::vector<bool>{true, false, false}));
      }
    }
  }
}

// The fused BatchNorm + ReLU units, forward (mask as bits) and backward (from the bits), with a
// residual z or the shortcut's BatchNorm and a summed dY: NHWC against NCHW on the same data,
// channels in one tile of the channels-last statistics kernel and past it (40 > 32).
TEST(CudaBackendGpu, ChannelsLastBatchNormReluUnitsMatchTheirNchwRuns) {
  REQUIRE_GPU();
  cuda::DeviceContext ctx;
  struct Case {
    std::vector<int64_t> dims;
    bool residual, summed, shortcut;
  };
  const Case cases[] = {{{2, 40, 5, 5}, false, false, false},
                        {{3, 6, 7, 3}, true, true, false},
                        {{2, 40, 3, 4}, true, true, true}};
  for (DType t : {DType::kFloat16, DType::kBFloat16})
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (c.residual ? " residual" : "") + (c.summed ? " summed" : "") +
                   (c.shortcut ? " shortcut" : "") + " C " + std::to_string(c.dims[1]));
      TypedGraph tg = bn_relu_layer(t, c.dims, c.residual, c.summed, c.shortcut);
      const std::vector<cuda::UnitMatch> units = units_of(tg.g(), cuda::match_batch_norm_relu);
      ASSERT_EQ(units.size(), 2u) << "the forward and the backward unit";
      ASSERT_TRUE(units[0].outputs.at(3)) << "the mask is kept as bits";
      compare_units(tg, units, true, t, ctx);
    }
}

// The plain BatchNormalization (training and inference mode) and BatchNormalizationGrad ops on
// cuDNN, with NHWC descriptors.
TEST(CudaBackendGpu, ChannelsLastBatchNormOpsMatchTheirNchwRuns) {
  REQUIRE_GPU();
  cuda::DeviceContext ctx;
  const std::vector<int64_t> dims{3, 40, 5, 4}, ch{40};
  const DType f = DType::kFloat;
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(t));
    const Tensor x = random_tensor(t, dims, 11, -1.0f, 4.0f), dy = random_tensor(t, dims, 12);
    const Tensor scale = random_tensor(f, ch, 13, 0.5f, 2.0f), bias = random_tensor(f, ch, 14),
                 mean = random_tensor(f, ch, 15), var = random_tensor(f, ch, 16, 0.5f, 2.0f);
    for (int training : {1, 0}) {
      SCOPED_TRACE(training ? "training" : "inference");
      test::OneNode bn("BatchNormalization",
                       {{"x", x}, {"scale", scale}, {"bias", bias}, {"mean", mean}, {"var", var}}, {t, f, f});
      bn.attr(Attribute::of_int("training_mode", training)).attr(Attribute::of_float("momentum", 0.8f));
      const auto op = cuda::find_cuda_op("", "BatchNormalization")->make(*bn.node, 17);
      const std::vector<const Tensor*> in = {&x, &scale, &bias, &mean, &var};
      std::vector<cuda::TensorDesc> outs = {{t, dims}, {f, ch}, {f, ch}};
      if (!training) outs.resize(1);
      const cuda::TensorDesc xd{t, dims}, pd{f, ch};
      cuda::OpShapes s;
      s.in = {&xd, &pd, &pd, &pd, &pd};
      for (const cuda::TensorDesc& d : outs) s.out.push_back(&d);
      const cuda::ChannelsLastOperands cl = op->channels_last(s);
      EXPECT_EQ(cl.in, (std::vector<bool>{true, false, false, false, false}));
      EXPECT_EQ(cl.out[0], true);
      const std::vector<Tensor> want = test::run_cuda_op(*op, ctx, in, outs, {});
      const std::vector<Tensor> got = test::run_cuda_op(*op, ctx, in, outs, cl);
      test::expect_close(got[0], want[0], "Y", 4.0);
      for (size_t k = 1; k < outs.size(); ++k) test::expect_close(got[k], want[k], "running statistic", sums_scale(t));
    }
    test::OneNode grad("BatchNormalizationGrad", {{"dy", dy}, {"x", x}, {"scale", scale}}, {t, f, f}, kAmpDomain);
    const auto op = cuda::find_cuda_op(kAmpDomain, "BatchNormalizationGrad")->make(*grad.node, 1);
    const std::vector<const Tensor*> in = {&dy, &x, &scale};
    const std::vector<cuda::TensorDesc> outs = {{t, dims}, {f, ch}, {f, ch}};
    const cuda::TensorDesc xd{t, dims}, pd{f, ch};
    cuda::OpShapes s;
    s.in = {&xd, &xd, &pd};
    for (const cuda::TensorDesc& d : outs) s.out.push_back(&d);
    const cuda::ChannelsLastOperands cl = op->channels_last(s);
    EXPECT_EQ(cl.in, (std::vector<bool>{true, true, false}));
    EXPECT_EQ(cl.out, (std::vector<bool>{true, false, false}));
    const std::vector<Tensor> want = test::run_cuda_op(*op, ctx, in, outs, {});
    const std::vector<Tensor> got = test::run_cuda_op(*op, ctx, in, outs, cl);
    test::expect_close(got[0], want[0], "dX", 4.0);
    test::expect_close(got[1], want[1], "dscale", sums_scale(t));
    test::expect_close(got[2], want[2], "dbias", sums_scale(t));
  }
}

// The convolutions with a BatchNorm + ReLU inside (statistics in the epilogue, the prologue, both,
// the weight gradient with the prologue) and the BatchNorm gradients that recompute the mask:
// NHWC with KRSC filters against NCHW, through cuDNN's graphs and (AMP_STANDIN_CUDNN_REFUSE_GRAPH=1,
// on the stand-ins) through the unfused fallback. On the stand-ins the channels-last graphs are
// the ones cuDNN took.
TEST(CudaBackendGpu, ChannelsLastConvolutionBatchNormUnitsMatchTheirNchwRuns) {
  REQUIRE_GPU();
  const test::ScopedEnv graphs("AMP_CUDNN_CONV_GRAPHS", "1");
  const std::string report = test::temp_dir("channels_last_conv_batch_norm") + "/report.jsonl";
  setenv("AMP_CUDA_REPORT", report.c_str(), 1);
  for (const char* refuse : {"0", "1"}) {
    setenv("AMP_STANDIN_CUDNN_REFUSE_GRAPH", refuse, 1);
    std::remove(report.c_str());
    cuda::DeviceContext ctx;  // reads AMP_CUDA_REPORT
    for (DType t : {DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (refuse[0] == '1' ? " unfused" : " fused"));
      TypedGraph tg = conv_batch_norm_chain(t);
      const std::vector<cuda::UnitMatch> units = units_of(tg.g(), cuda::match_conv_batch_norm);
      std::string kinds;
      for (const cuda::UnitMatch& u : units) kinds += u.nodes.front()->op_type() + ";";
      ASSERT_EQ(kinds, "Conv;Conv;Conv;ConvGrad;BatchNormalizationGrad;ConvGrad;BatchNormalizationGrad;");
      compare_units(tg, units, false, t, ctx);
    }
    if (!test::on_standins()) continue;
    // Every graph, NCHW and NHWC, as the stand-in engine answered it.
    int nhwc = 0;
    std::ifstream in(report);
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j["event"] != "convolution_graph") continue;
      EXPECT_EQ(j["result"], refuse[0] == '1' ? "unfused" : "fused") << line;
      EXPECT_GE(std::stod(j["build ms"].get<std::string>()), 0.0) << line;  // the build's time, for cold starts
      // The engine that runs a built graph, as cuDNN numbers it, and its rank among those offered.
      if (refuse[0] == '0') {
        EXPECT_EQ(j["engine"].get<std::string>().rfind("engine ", 0), 0u) << line;
        EXPECT_NE(j["engine"].get<std::string>().find("(heuristic result 0 of "), std::string::npos) << line;
      }
      nhwc += j["shape"].get<std::string>().find(" nhwc ") != std::string::npos;
    }
    // Per type: the statistics, prologue + statistics and prologue convolutions and the two
    // weight gradients, each built when its unit is prepared channels-last.
    EXPECT_EQ(nhwc, 2 * 5);
  }
  unsetenv("AMP_STANDIN_CUDNN_REFUSE_GRAPH");
  unsetenv("AMP_CUDA_REPORT");
}

// Convolution graphs are off unless AMP_CUDNN_CONV_GRAPHS=1 (conv_batch_norm_fusion.cc: on an
// H200 the step was faster and started sooner without them): unset or 0, no convolution graph is
// built, every unit runs its unfused path (the prologue into scratch, the legacy convolution, the
// statistics in a pass of their own), says so in the device report, and computes what the NCHW
// runs do.
TEST(CudaBackendGpu, ConvolutionGraphsAreOffUnlessAskedFor) {
  REQUIRE_GPU();
  for (const char* setting : {"", "0"}) {
    SCOPED_TRACE(std::string("AMP_CUDNN_CONV_GRAPHS=") + setting);
    const test::ScopedEnv graphs("AMP_CUDNN_CONV_GRAPHS", setting);
    const std::string report = test::temp_dir("conv_graphs_off") + "/report.jsonl";
    const test::ScopedEnv report_env("AMP_CUDA_REPORT", report);
    std::remove(report.c_str());
    {
      cuda::DeviceContext ctx;
      TypedGraph tg = conv_batch_norm_chain(DType::kFloat16);
      compare_units(tg, units_of(tg.g(), cuda::match_conv_batch_norm), false, DType::kFloat16, ctx);
    }
    size_t lines = 0;
    std::ifstream in(report);
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j["event"] != "convolution_graph") continue;
      ++lines;
      EXPECT_EQ(j["result"], "unfused") << line;
      EXPECT_EQ(j["why"], "off: AMP_CUDNN_CONV_GRAPHS=1 builds them") << line;
    }
    EXPECT_EQ(lines, 2u * 5) << "each of the five graphs asked for in both layouts";
  }
}

// AMP_CUDNN_GRAPH_TUNE=1 (convolution_graph_tuning.h): every engine the heuristic offers for a
// convolution graph whose plan finalizes is timed, the fastest runs and is remembered for the
// shape; a later device context (the next run, same kernel cache folder) finalizes only that one.
// On the stand-ins four engines are offered (AMP_STANDIN_CUDNN_GRAPH_ENGINES): 12 ms, 3 ms, one
// refusing its plan, 20 ms a run. The units compute what their NCHW runs do either way.
TEST(CudaBackendGpu, TunedConvolutionGraphsRunTheFastestOfferedEngineAndRememberIt) {
  REQUIRE_GPU();
  const test::ScopedEnv graphs("AMP_CUDNN_CONV_GRAPHS", "1");
  const test::ScopedEnv tune("AMP_CUDNN_GRAPH_TUNE", "1");
  const test::ScopedEnv engines("AMP_STANDIN_CUDNN_GRAPH_ENGINES", "12,3,refuse,20");
  const test::ScopedEnv cache("AMP_KERNEL_CACHE_DIR", test::temp_dir("graph_tuning_cache"));
  const std::string report = test::temp_dir("graph_tuning") + "/report.jsonl";
  const test::ScopedEnv report_env("AMP_CUDA_REPORT", report);
  std::remove(report.c_str());
  auto graph_lines = [&] {
    std::vector<nlohmann::json> lines;
    std::ifstream in(report);
    for (std::string line; std::getline(in, line);) {
      nlohmann::json j = nlohmann::json::parse(line);
      if (j["event"] == "convolution_graph" && j["result"] == "fused") lines.push_back(std::move(j));
    }
    return lines;
  };
  std::map<std::string, std::string> chosen;  // shape and graph -> the engine that ran
  {
    cuda::DeviceContext first;
    TypedGraph tg = conv_batch_norm_chain(DType::kBFloat16);
    compare_units(tg, units_of(tg.g(), cuda::match_conv_batch_norm), false, DType::kBFloat16, first);
  }
  const std::vector<nlohmann::json> measured = graph_lines();
  ASSERT_FALSE(measured.empty());
  for (const nlohmann::json& j : measured) {
    SCOPED_TRACE(j.dump());
    EXPECT_EQ(j["remembered"], "no");
    const std::string engine = j["engine"], times = j["engines measured"];
    chosen[j["graph"].get<std::string>() + " " + j["shape"].get<std::string>()] = engine.substr(0, engine.find(')') + 1);
    if (!test::on_standins()) continue;
    EXPECT_EQ(engine.rfind("engine 101 (heuristic result 1 of 4); refused: result 2 ", 0), 0u);
    for (const char* e : {"engine 100 (heuristic result 0 of 4) ", "engine 101 (heuristic result 1 of 4) ",
                          "engine 103 (heuristic result 3 of 4) "})
      EXPECT_NE(times.find(e), std::string::npos) << e;
    EXPECT_EQ(times.find("engine 102"), std::string::npos) << "its plan did not finalize: not timed";
  }
  std::remove(report.c_str());
  {
    cuda::DeviceContext second;  // reads the choices back from the cache folder
    TypedGraph tg = conv_batch_norm_chain(DType::kBFloat16);
    compare_units(tg, units_of(tg.g(), cuda::match_conv_batch_norm), false, DType::kBFloat16, second);
  }
  const std::vector<nlohmann::json> again = graph_lines();
  ASSERT_EQ(again.size(), measured.size());
  for (const nlohmann::json& j : again) {
    SCOPED_TRACE(j.dump());
    EXPECT_EQ(j["remembered"], "yes");
    EXPECT_EQ(j["engines measured"], "") << "a remembered choice is not timed again";
    const std::string engine = j["engine"];
    EXPECT_EQ(engine.substr(0, engine.find(')') + 1), chosen[j["graph"].get<std::string>() + " " + j["shape"].get<std::string>()]);
  }
}

#endif  // AMP_HAVE_CUDA

}  // namespace
}  // namespace amp
