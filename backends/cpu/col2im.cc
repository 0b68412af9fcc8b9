// ai.onnx_amp Col2Im (ONNX opset 18, as torch.nn.functional.fold in 2-D, any spatial rank here):
// input [N, C·B, L] holds, for each of the L places a block of block_shape (B elements) takes when
// it slides over the padded image (strides, dilations), C columns of B values; each value is added
// to the image element it covers, those in the padding dropped. Sums run in compute_t (fp32 for
// 16-bit types, rounded once).
//
// ai.onnx_amp Im2Col(X, block_shape), its gradient (torch.nn.functional.unfold): the same places
// read out of X, zero in the padding.
#include <algorithm>
#include <string>
#include <vector>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"
#include "graph/ops/window.h"

namespace amp::cpu {
namespace {

// For block element k and place l, the flat image position it covers (-1 in the padding): [B][L].
struct BlockPlaces {
  int64_t block = 1, places = 1, image = 1;
  std::vector<int64_t> at;
};

BlockPlaces block_places(const WindowAttrs& attrs, const std::vector<int64_t>& image, const std::vector<int64_t>& block,
                         const char* op) {
  if (image.size() != block.size() || image.empty())
    throw InputError(std::string(op) + "'s image " + dims_str(image) + " and block_shape " + dims_str(block) +
                     " must have one positive rank");
  const Window win = make_window(attrs, image, block);
  const size_t r = image.size();
  BlockPlaces b;
  b.block = product(block);
  b.places = product(win.out);
  b.image = product(image);
  b.at.assign(static_cast<size_t>(b.block * b.places), -1);
  std::vector<int64_t> k_index(r), l_index(r);
  for (int64_t k = 0; k < b.block; ++k) {
    for (int64_t rest = k, d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
      k_index[d] = rest % block[d];
      rest /= block[d];
    }
    for (int64_t l = 0; l < b.places; ++l) {
      int64_t flat = 0;
      bool inside = true;
      for (int64_t rest = l, d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
        l_index[d] = rest % win.out[d];
        rest /= win.out[d];
      }
      for (size_t d = 0; d < r && inside; ++d) {
        const int64_t pos = l_index[d] * win.strides[d] - win.pads_begin[d] + k_index[d] * win.dilations[d];
        inside = pos >= 0 && pos < image[d];
        flat = flat * image[d] + pos;
      }
      if (inside) b.at[static_cast<size_t>(k * b.places + l)] = flat;
    }
  }
  return b;
}

using Col2ImTypes = JoinTypes<FloatTypes, TypeList<int32_t, int64_t>>::type;

// Col2Im(input, image_shape, block_shape).
class Col2Im final : public Kernel {
 public:
  Col2Im(const Node& n, int64_t) : attrs_(n) {}

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& in = io.input(0);
    View& out = io.output(0);
    const BlockPlaces b = block_places(attrs_, read_ints(io.input(1)), read_ints(io.input(2)), "Col2Im");
    const int64_t planes = out.dims[0] * out.dims[1];
    dispatch(Col2ImTypes{}, in.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* cols = in.as<T>();
      T* image = out.as<T>();
      parallel_for(planes, ctx.threads, 1, [&](int64_t p0, int64_t p1) {
        std::vector<C> acc(static_cast<size_t>(b.image));
        for (int64_t plane = p0; plane < p1; ++plane) {
          std::fill(acc.begin(), acc.end(), C(0));
          const T* src = cols + plane * b.block * b.places;
          for (size_t i = 0; i < b.at.size(); ++i)
            if (b.at[i] >= 0) acc[static_cast<size_t>(b.at[i])] += load(src[i]);
          for (int64_t i = 0; i < b.image; ++i) image[plane * b.image + i] = store<T>(acc[static_cast<size_t>(i)]);
        }
      });
    });
  }

 private:
  WindowAttrs attrs_;
};

// Im2Col(X [N, C, spatial...], block_shape).
class Im2Col final : public Kernel {
 public:
  Im2Col(const Node& n, int64_t) : attrs_(n) {}

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const BlockPlaces b = block_places(attrs_, std::vector<int64_t>(x.dims.begin() + 2, x.dims.end()),
                                       read_ints(io.input(1)), "Im2Col");
    const int64_t planes = x.dims[0] * x.dims[1];
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* image = x.as<T>();
      T* cols = io.output(0).as<T>();
      parallel_for(planes, ctx.threads, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t plane = p0; plane < p1; ++plane) {
          T* dst = cols + plane * b.block * b.places;
          const T* src = image + plane * b.image;
          for (size_t i = 0; i < b.at.size(); ++i) dst[i] = b.at[i] >= 0 ? src[b.at[i]] : convert<T>(0.0f);
        }
      });
    });
  }

 private:
  WindowAttrs attrs_;
};

}  // namespace

const std::vector<OpEntry>& col2im_ops() {
  static const std::vector<OpEntry> ops = {{"Col2Im", make_kernel<Col2Im>, Col2ImTypes::mask(), {1, 2}},
                                           {"Im2Col", make_kernel<Im2Col>, FloatTypes::mask(), {1}}};
  return ops;
}

}  // namespace amp::cpu
