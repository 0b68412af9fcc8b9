#include "backends/cpu/onednn_conv.h"

#include "backends/cpu/onednn_layout.h"
#include "backends/cpu/onednn_runtime.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>

namespace amp::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

using onednn::aligned;
using onednn::engine;
using onednn::OmpThreads;
using onednn::require_optimised;
using onednn::stream;
using onednn::user_scratchpad;

dt data_type(DnnlType t) { return t == DnnlType::kF32 ? dt::f32 : dt::bf16; }

tag activation_tag(size_t spatial) { return spatial == 1 ? tag::ncw : spatial == 2 ? tag::nchw : tag::ncdhw; }

tag weights_tag(size_t spatial, bool grouped) {
  if (grouped) return spatial == 1 ? tag::goiw : spatial == 2 ? tag::goihw : tag::goidhw;
  return spatial == 1 ? tag::oiw : spatial == 2 ? tag::oihw : tag::oidhw;
}

struct Geometry {
  memory::dims src, weights, dst, bias, strides, dilations, pad_l, pad_r;
  tag act_tag, w_tag;
  // Where the window never reaches the input's last rows or columns (ONNX's output size rounds
  // down: a 1x1 stride-2 convolution of an even size skips the last row), oneDNN would need a
  // negative right pad, which it rejects. The convolution then reads a cropped view of X instead:
  // `src` holds the rows the window reaches, `full_src` the tensor's own dims. dX is zero outside
  // the view.
  memory::dims full_src;
  std::vector<int64_t> onnx_weights;  // W's own dims: [M, C/g, k...]
  int64_t groups = 1;
  bool cropped() const { return full_src != src; }
  // W (or dW) as the caller holds it: dense, or in a blocked layout it keeps between steps.
  memory::desc weights_desc(dt t, int layout) const {
    return layout ? onednn::layout_desc(onnx_weights, t, layout) : memory::desc(weights, t, w_tag);
  }
  memory::desc src_desc(dt t) const {
    if (!cropped()) return memory::desc(src, t, act_tag);
    memory::dims strides(full_src.size(), 1);  // the whole tensor's dense strides
    for (size_t i = full_src.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * full_src[i];
    return memory::desc(src, t, strides);
  }
};

// oneDNN's view of the convolution; nullopt for geometries it cannot express.
std::optional<Geometry> geometry(const ConvShape& s) {
  const size_t r = s.in.size();
  if (r < 1 || r > 3 || s.n <= 0 || s.c <= 0 || s.m <= 0 || s.groups <= 0 || s.c % s.groups || s.m % s.groups) return std::nullopt;
  Geometry g;
  g.src = {s.n, s.c};
  g.dst = {s.n, s.m};
  if (s.groups > 1)
    g.weights = {s.groups, s.m / s.groups, s.c / s.groups};
  else
    g.weights = {s.m, s.c};
  g.bias = {s.m};
  for (size_t i = 0; i < r; ++i) {
    g.src.push_back(s.in[i]);
    g.dst.push_back(s.out[i]);
    g.weights.push_back(s.kernel[i]);
    g.strides.push_back(s.strides[i]);
    g.dilations.push_back(s.dilations[i] - 1);
    g.pad_l.push_back(s.pads_begin[i]);
    const int64_t pr = (s.out[i] - 1) * s.strides[i] + (s.kernel[i] - 1) * s.dilations[i] + 1 - s.in[i] - s.pads_begin[i];
    if (s.out[i] <= 0 || s.pads_begin[i] < 0) return std::nullopt;
    if (pr < 0) g.src.back() += pr;  // crop: the rows past the window's last reach
    if (g.src.back() <= 0) return std::nullopt;
    g.pad_r.push_back(std::max<int64_t>(pr, 0));
  }
  g.act_tag = activation_tag(r);
  g.w_tag = weights_tag(r, s.groups > 1);
  g.groups = s.groups;
  g.onnx_weights = {s.m, s.c / s.groups};
  g.onnx_weights.insert(g.onnx_weights.end(), s.kernel.begin(), s.kernel.end());
  g.full_src = {s.n, s.c};
  g.full_src.insert(g.full_src.end(), s.in.begin(), s.in.end());
  return g;
}

// Zeroes the elements of a dense [N, C, spatial...] tensor (`full` dims) outside its leading
// `kept` corner: what a convolution over a cropped view leaves untouched in dX.
void zero_outside(void* data, const memory::dims& full, const memory::dims& kept, size_t element) {
  // Spatial dims as depth, height, width (missing leading ones are 1).
  int64_t f[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  const size_t r = full.size() - 2;
  for (size_t i = 0; i < r; ++i) {
    f[3 - r + i] = full[2 + i];
    k[3 - r + i] = kept[2 + i];
  }
  auto* p = static_cast<uint8_t*>(data);
  const int64_t planes = full[0] * full[1], plane = f[0] * f[1] * f[2];
  auto zero = [&](int64_t at, int64_t n) { std::memset(p + at * element, 0, static_cast<size_t>(n) * element); };
  for (int64_t q = 0; q < planes; ++q) {
    const int64_t base = q * plane;
    for (int64_t z = 0; z < f[0]; ++z) {
      const int64_t slab = base + z * f[1] * f[2];
      if (z >= k[0]) {
        zero(slab, f[1] * f[2]);
        continue;
      }
      for (int64_t y = 0; y < f[1]; ++y) {
        if (y >= k[1])
          zero(slab + y * f[2], f[2]);
        else if (k[2] < f[2])
          zero(slab + y * f[2] + k[2], f[2] - k[2]);
      }
    }
  }
}

// A tensor as the caller holds it (plain layout) and as a primitive wants it: when the layouts
// differ, a reorder between the caller's buffer and a region of the workspace.
struct Port {
  memory::desc user, inner;
  bool reordered = false;
  dnnl::reorder to_inner, to_user;
  size_t offset = 0;
  memory user_mem, inner_mem;

  // inbound: the primitive reads it; otherwise it writes it.
  void init(const memory::desc& user_md, const memory::desc& inner_md, bool inbound, size_t* used) {
    user = user_md;
    inner = inner_md;
    user_mem = memory(user, engine(), DNNL_MEMORY_NONE);
    reordered = user != inner;
    if (!reordered) return;
    inner_mem = memory(inner, engine(), DNNL_MEMORY_NONE);
    offset = *used;
    *used += aligned(inner.get_size());
    if (inbound)
      to_inner = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), user, engine(), inner));
    else
      to_user = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), inner, engine(), user));
  }

  // The memory object the primitive is bound to.
  memory& primitive_side() { return reordered ? inner_mem : user_mem; }
  // Points at the caller's data and copies it into the primitive's layout when needed.
  memory& read(const void* data, uint8_t* scratch) {
    user_mem.set_data_handle(const_cast<void*>(data));
    if (!reordered) return user_mem;
    inner_mem.set_data_handle(scratch + offset);
    to_inner.execute(stream(), user_mem, inner_mem);
    return inner_mem;
  }
  // Points at the caller's buffer; finish_write() moves the primitive's result into it.
  memory& write(void* data, uint8_t* scratch) {
    user_mem.set_data_handle(data);
    if (!reordered) return user_mem;
    inner_mem.set_data_handle(scratch + offset);
    return inner_mem;
  }
  void finish_write() {
    if (reordered) to_user.execute(stream(), inner_mem, user_mem);
  }
};

memory::desc any(const memory::dims& d, dt t) { return memory::desc(d, t, tag::any); }

}  // namespace

// ---- forward ----

struct DnnlConvForward::Impl {
  int threads = 1;
  bool bias = false;
  dnnl::convolution_forward prim;
  Port x, w, y;
  memory bias_mem, scratchpad;
  size_t scratchpad_offset = 0, total = 0;
  std::unordered_map<int, memory> args;  // made once: runs only repoint the memories
  int weights_layout = 0;                // the primitive's own layout of W
};

DnnlConvForward::DnnlConvForward(const ConvShape& shape, DnnlType type, bool bias, int threads, int w_layout) {
  const auto g = geometry(shape);
  if (!g) return;
  OmpThreads omp(threads);
  try {
    auto impl = std::make_unique<Impl>();
    impl->threads = threads;
    impl->bias = bias;
    const dt t = data_type(type);
    const memory::desc bias_md = bias ? memory::desc(g->bias, t, tag::x) : memory::desc();
    // forward_training, in inference too: oneDNN 2.6 then picks its direct jit kernels, whose weight
    // layouts reorder cheaply, where forward_inference picks brgconv and a weight layout
    // (AcdB32a2b) whose reorder took 2.7 ms for one 512x512x3x3 bf16 weight. The weights reorder
    // every training step: resnet18's bf16 Conv time fell from 24.8 to 13.2 ms a step, fp32's from
    // 27.6 to 23.3 (1 thread, AMP_PROFILE=1), and the cnn's fp32 forward from 2.6 to 2.4 ms.
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                      any(g->src, t), any(g->weights, t), bias_md, any(g->dst, t), g->strides,
                                      g->dilations, g->pad_l, g->pad_r);
    dnnl::convolution_forward::primitive_desc pd(d, user_scratchpad(), engine());
    require_optimised(pd.impl_info_str());
    size_t used = 0;
    impl->x.init(g->src_desc(t), pd.src_desc(), true, &used);
    impl->w.init(g->weights_desc(t, w_layout), pd.weights_desc(), true, &used);
    impl->weights_layout = onednn::weights_layout(pd.weights_desc(), g->onnx_weights, g->groups);
    impl->y.init(memory::desc(g->dst, t, g->act_tag), pd.dst_desc(), false, &used);
    if (bias) impl->bias_mem = memory(bias_md, engine(), DNNL_MEMORY_NONE);
    impl->scratchpad = memory(pd.scratchpad_desc(), engine(), DNNL_MEMORY_NONE);
    impl->scratchpad_offset = used;
    impl->total = used + aligned(pd.scratchpad_desc().get_size());
    impl->prim = dnnl::convolution_forward(pd);
    auto& a = impl->args;
    a.emplace(DNNL_ARG_SRC, impl->x.primitive_side());
    a.emplace(DNNL_ARG_WEIGHTS, impl->w.primitive_side());
    if (bias) a.emplace(DNNL_ARG_BIAS, impl->bias_mem);
    a.emplace(DNNL_ARG_DST, impl->y.primitive_side());
    a.emplace(DNNL_ARG_SCRATCHPAD, impl->scratchpad);
    impl_ = std::move(impl);
  } catch (const dnnl::error&) {
    impl_.reset();  // no implementation here: the caller's own path runs
  }
}

DnnlConvForward::~DnnlConvForward() = default;

size_t DnnlConvForward::scratch_bytes() const { return impl_ ? impl_->total : 0; }
int DnnlConvForward::weights_layout() const { return impl_ ? impl_->weights_layout : 0; }

void DnnlConvForward::run(const void* x, const void* w, const void* bias, void* y, void* scratch) const {
  Impl& p = *impl_;
  OmpThreads omp(p.threads);
  auto* base = static_cast<uint8_t*>(scratch);
  p.x.read(x, base);
  p.w.read(w, base);
  if (p.bias) p.bias_mem.set_data_handle(const_cast<void*>(bias));
  p.y.write(y, base);
  p.scratchpad.set_data_handle(base + p.scratchpad_offset);
  p.prim.execute(stream(), p.args);
  p.y.finish_write();
  stream().wait();
}

// ---- backward ----

struct DnnlConvBackward::Impl {
  int threads = 1;
  bool dx = false, dw = false, db = false, share_dy = false;
  dnnl::convolution_backward_data data;
  dnnl::convolution_backward_weights weights;
  Port dy_d, w_d, dx_d;     // backward-data's operands
  Port x_w, dy_w, dw_w;     // backward-weights' operands
  memory db_mem, scratchpad_d, scratchpad_w;
  size_t scratchpad_offset = 0, total = 0;
  std::unordered_map<int, memory> data_args, weights_args;
  memory::dims full_src, kept_src;  // set when the convolution reads a cropped view of X
  size_t element = 0;
  int data_weights_layout = 0, diff_weights_layout = 0;  // the primitives' own layouts of W and dW
};

DnnlConvBackward::DnnlConvBackward(const ConvShape& shape, DnnlType type, bool want_dx, bool want_dw, bool want_db,
                                   int threads, int w_layout, int dw_layout) {
  const auto g = geometry(shape);
  if (!g || !(want_dx || want_dw || want_db)) return;
  OmpThreads omp(threads);
  try {
    auto impl = std::make_unique<Impl>();
    impl->threads = threads;
    impl->dx = want_dx;
    if (g->cropped()) {
      impl->full_src = g->full_src;
      impl->kept_src = g->src;
      impl->element = type == DnnlType::kF32 ? 4 : 2;
    }
    impl->dw = want_dw || want_db;
    impl->db = want_db;
    const dt t = data_type(type);
    const auto alg = dnnl::algorithm::convolution_direct;
    const memory::desc src_user = g->src_desc(t), dst_user(g->dst, t, g->act_tag),
        w_user = g->weights_desc(t, w_layout), dw_user = g->weights_desc(t, dw_layout), db_md(g->bias, dt::f32, tag::x);
    dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training, alg, any(g->src, t), any(g->weights, t),
                                       want_db ? memory::desc(g->bias, t, tag::x) : memory::desc(), any(g->dst, t),
                                       g->strides, g->dilations, g->pad_l, g->pad_r);
    dnnl::convolution_forward::primitive_desc hint(fd, engine());
    size_t used = 0, scratchpad = 0;
    if (impl->dx) {
      dnnl::convolution_backward_data::desc d(alg, any(g->src, t), any(g->weights, t), any(g->dst, t), g->strides,
                                              g->dilations, g->pad_l, g->pad_r);
      dnnl::convolution_backward_data::primitive_desc pd(d, user_scratchpad(), engine(), hint);
      require_optimised(pd.impl_info_str());
      impl->dy_d.init(dst_user, pd.diff_dst_desc(), true, &used);
      impl->w_d.init(w_user, pd.weights_desc(), true, &used);
      impl->data_weights_layout = onednn::weights_layout(pd.weights_desc(), g->onnx_weights, g->groups);
      impl->dx_d.init(src_user, pd.diff_src_desc(), false, &used);
      impl->scratchpad_d = memory(pd.scratchpad_desc(), engine(), DNNL_MEMORY_NONE);
      scratchpad = std::max(scratchpad, pd.scratchpad_desc().get_size());
      impl->data = dnnl::convolution_backward_data(pd);
      impl->data_args = {{DNNL_ARG_DIFF_DST, impl->dy_d.primitive_side()},
                         {DNNL_ARG_WEIGHTS, impl->w_d.primitive_side()},
                         {DNNL_ARG_DIFF_SRC, impl->dx_d.primitive_side()},
                         {DNNL_ARG_SCRATCHPAD, impl->scratchpad_d}};
    }
    if (impl->dw) {
      // The weights' gradient in the element type: for bf16, oneDNN's fp32 sums rounded once into a
      // bf16 blocked layout, whose reorder to plain moves half the bytes of an fp32 one (resnet18:
      // 8 ms a step went into reordering fp32 weight gradients).
      dnnl::convolution_backward_weights::desc d(alg, any(g->src, t), any(g->weights, t),
                                                 want_db ? db_md : memory::desc(), any(g->dst, t), g->strides,
                                                 g->dilations, g->pad_l, g->pad_r);
      dnnl::convolution_backward_weights::primitive_desc pd(d, user_scratchpad(), engine(), hint);
      require_optimised(pd.impl_info_str());
      impl->x_w.init(src_user, pd.src_desc(), true, &used);
      // dY in the layout backward-data already put it in is reordered once for both.
      impl->share_dy = impl->dx && impl->dy_d.reordered && pd.diff_dst_desc() == impl->dy_d.inner;
      if (impl->share_dy)
        impl->dy_w = impl->dy_d;
      else
        impl->dy_w.init(dst_user, pd.diff_dst_desc(), true, &used);
      impl->dw_w.init(dw_user, pd.diff_weights_desc(), false, &used);
      if (want_dw) impl->diff_weights_layout = onednn::weights_layout(pd.diff_weights_desc(), g->onnx_weights, g->groups);
      if (want_db) impl->db_mem = memory(db_md, engine(), DNNL_MEMORY_NONE);
      impl->scratchpad_w = memory(pd.scratchpad_desc(), engine(), DNNL_MEMORY_NONE);
      scratchpad = std::max(scratchpad, pd.scratchpad_desc().get_size());
      impl->weights = dnnl::convolution_backward_weights(pd);
      impl->weights_args = {{DNNL_ARG_SRC, impl->x_w.primitive_side()},
                            {DNNL_ARG_DIFF_DST, impl->dy_w.primitive_side()},
                            {DNNL_ARG_DIFF_WEIGHTS, impl->dw_w.primitive_side()},
                            {DNNL_ARG_SCRATCHPAD, impl->scratchpad_w}};
      if (want_db) impl->weights_args.emplace(DNNL_ARG_DIFF_BIAS, impl->db_mem);
    }
    impl->scratchpad_offset = used;
    impl->total = used + aligned(scratchpad);
    impl_ = std::move(impl);
  } catch (const dnnl::error&) {
    impl_.reset();
  }
}

DnnlConvBackward::~DnnlConvBackward() = default;

size_t DnnlConvBackward::scratch_bytes() const { return impl_ ? impl_->total : 0; }
int DnnlConvBackward::data_weights_layout() const { return impl_ ? impl_->data_weights_layout : 0; }
int DnnlConvBackward::diff_weights_layout() const { return impl_ ? impl_->diff_weights_layout : 0; }

void DnnlConvBackward::run(const void* dy, const void* x, const void* w, void* dx, void* dw, float* db,
                           void* scratch) const {
  Impl& p = *impl_;
  OmpThreads omp(p.threads);
  auto* base = static_cast<uint8_t*>(scratch);
  uint8_t* pad = base + p.scratchpad_offset;
  if (p.dx) {
    p.dy_d.read(dy, base);
    p.w_d.read(w, base);
    p.dx_d.write(dx, base);
    p.scratchpad_d.set_data_handle(pad);
    p.data.execute(stream(), p.data_args);
    p.dx_d.finish_write();
    if (!p.full_src.empty()) zero_outside(dx, p.full_src, p.kept_src, p.element);
  }
  if (p.dw) {
    p.x_w.read(x, base);
    if (!p.share_dy) p.dy_w.read(dy, base);
    p.dw_w.write(dw, base);
    if (p.db) p.db_mem.set_data_handle(db);
    p.scratchpad_w.set_data_handle(pad);
    p.weights.execute(stream(), p.weights_args);
    p.dw_w.finish_write();
  }
  stream().wait();
}

}  // namespace amp::cpu
