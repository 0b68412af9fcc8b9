// roi_align.cu on the fiber emulator against the CPU backend's one-node RoiAlign, bit for bit, in
// float and float16: modes avg and max, coordinate_transformation_mode half_pixel and
// output_half_pixel, sampling_ratio 0 (ceil of the bin size: regions of different sizes take
// different sample counts) and 2, a spatial_scale, regions partly off the map and ones smaller
// than a pixel, batch indices into every entry, more outputs than the grid (the loop goes round),
// no regions. A batch index out of range, which the CPU refuses, gives zeros.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "graph/half.h"
#include "tests/support/cuda_emulator.h"
#include "tests/support/guarded_buffer.h"
#include "tests/support/one_node.h"

#define cuda cuda_emulated
#include "backends/cuda/roi_align.cuh"
#undef cuda

namespace amp {
namespace {

namespace emu = cuda_emulated;

Tensor of_floats(DType t, const std::vector<int64_t>& dims, const std::vector<float>& v) {
  Tensor x(t, dims);
  for (size_t k = 0; k < v.size(); ++k) {
    if (t == DType::kFloat) x.mutable_as<float>()[k] = v[k];
    else x.mutable_as<uint16_t>()[k] = fp32_to_fp16(v[k]);
  }
  return x;
}

std::vector<float> uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = u(rng);
  return v;
}

TEST(CudaKernelsEmulated, RoiAlignMatchesTheCpuBitForBit) {
  const std::vector<int64_t> x_dims = {2, 16, 10, 12};
  // [x1, y1, x2, y2] in input pixels (spatial_scale 1) or in a map twice as large (0.5).
  const std::vector<float> boxes = {0.0f, 0.0f, 9.0f, 7.0f,      // most of the map
                                    2.5f, 3.25f, 6.0f, 4.0f,     // a narrow band
                                    -3.0f, -2.0f, 4.0f, 5.0f,    // partly off the map
                                    8.0f, 6.0f, 14.0f, 12.0f,    // off the far edges
                                    5.0f, 5.0f, 5.4f, 5.2f,      // smaller than a pixel
                                    1.0f, 1.0f, 11.0f, 9.0f};    // all of it
  const int64_t rois = 6;
  struct Case {
    const char* mode;
    const char* ctm;
    int64_t ratio, out_h, out_w;
    float scale;
  };
  const Case cases[] = {{"avg", "half_pixel", 0, 3, 4, 1.0f},        {"max", "half_pixel", 0, 3, 4, 1.0f},
                        {"avg", "output_half_pixel", 2, 2, 2, 1.0f}, {"max", "output_half_pixel", 0, 5, 3, 0.5f},
                        {"avg", "half_pixel", 2, 7, 7, 0.5f},        {"avg", "half_pixel", 0, 1, 1, 1.0f}};
  uint32_t seed = 570;
  for (const Case& c : cases)
    for (DType t : {DType::kFloat, DType::kFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + c.mode + " " + c.ctm + " ratio " + std::to_string(c.ratio) +
                   " out " + std::to_string(c.out_h) + "x" + std::to_string(c.out_w));
      const Tensor x = of_floats(t, x_dims, uniform(2 * 16 * 10 * 12, seed++, -2.0f, 2.0f));
      const Tensor r = of_floats(t, {rois, 4}, boxes);
      Tensor batch(DType::kInt64, {rois});
      for (int64_t k = 0; k < rois; ++k) batch.mutable_as<int64_t>()[k] = k % 2;
      test::OneNode node("RoiAlign", {{"x", x}, {"rois", r}, {"batch", batch}}, {t});
      node.attr(Attribute::of_string("mode", c.mode));
      node.attr(Attribute::of_string("coordinate_transformation_mode", c.ctm));
      node.attr(Attribute::of_int("sampling_ratio", c.ratio));
      node.attr(Attribute::of_int("output_height", c.out_h));
      node.attr(Attribute::of_int("output_width", c.out_w));
      node.attr(Attribute::of_float("spatial_scale", c.scale));
      const Tensor want = node.run_cpu()[0];
      emu::RoiAlignShape s;
      s.batch = 2;
      s.channels = 16;
      s.height = 10;
      s.width = 12;
      s.rois = rois;
      s.out_h = c.out_h;
      s.out_w = c.out_w;
      s.max = std::string(c.mode) == "max";
      s.half_pixel = std::string(c.ctm) == "half_pixel";
      s.sampling_ratio = c.ratio;
      s.spatial_scale = c.scale;
      test::GuardedBuffer in(x), boxes_in(r), batch_in(batch), out(want.nbytes(), 0xa5);
      emu::roi_align(t, s, in.data(), boxes_in.data(), static_cast<const int64_t*>(batch_in.data()), out.data(), 2,
                     nullptr);
      ASSERT_EQ(std::memcmp(out.data(), want.data(), want.nbytes()), 0) << "differs from the CPU kernel";
      if (c.out_h == 7) {  // 6 * 16 * 49 = 4704 outputs > 16 blocks of 256; then none: no regions
        s.rois = 0;
        emu::roi_align(t, s, in.data(), boxes_in.data(), static_cast<const int64_t*>(batch_in.data()), nullptr, 2,
                       nullptr);
      }
    }
}

TEST(CudaKernelsEmulated, RoiAlignGivesZerosForABatchIndexOutOfRange) {
  const Tensor x = of_floats(DType::kFloat, {1, 1, 4, 4}, uniform(16, 5, 1.0f, 2.0f));
  const float boxes[4] = {0.0f, 0.0f, 3.0f, 3.0f};
  const int64_t batch[1] = {1};
  emu::RoiAlignShape s;
  s.batch = s.channels = 1;
  s.height = s.width = 4;
  s.rois = 1;
  s.out_h = s.out_w = 2;
  test::GuardedBuffer in(x), out(4 * sizeof(float), 0xa5);
  emu::roi_align(DType::kFloat, s, in.data(), boxes, batch, out.data(), 2, nullptr);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(static_cast<const float*>(out.data())[k], 0.0f);
}

}  // namespace
}  // namespace amp
