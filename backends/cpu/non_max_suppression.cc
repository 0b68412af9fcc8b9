// NonMaxSuppression: per batch and class, the boxes whose score is above score_threshold, best
// score first (equal scores: lower box index first), each kept unless its IoU with a box already
// kept for that class exceeds iou_threshold, at most max_output_boxes_per_class of them (0, the
// default: none). Output: int64 [selected, 3] rows (batch, class, box), batch by batch, class by
// class, in the order kept. Boxes are corners [y1, x1, y2, x2] (either diagonal) or, with
// center_point_box 1, [x_center, y_center, width, height]; the IoU is ONNX Runtime's (a box of no
// area overlaps nothing). How many boxes are kept depends on the data, so the op runs while its
// plan is made (Kernel::runs_while_planning): every input is known then, and the output is a
// constant of the plan, made again for other inputs.
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

struct Corners {
  float y1, x1, y2, x2;
};

class NonMaxSuppression final : public Kernel {
 public:
  NonMaxSuppression(const Node& n, int64_t) : center_(n.attr_int("center_point_box", 0) != 0) {}
  bool runs_while_planning() const override { return true; }

  size_t infer(KernelIO& io) const override {
    selected_ = select(io);
    View& out = io.output(0);
    out.dtype = DType::kInt64;
    out.dims = {static_cast<int64_t>(selected_.size() / 3), 3};
    computed_ = true;
    return 0;
  }

  void run(KernelIO& io, const RunContext&) const override {
    if (!computed_) selected_ = select(io);
    if (!selected_.empty()) std::memcpy(io.output(0).data, selected_.data(), selected_.size() * sizeof(int64_t));
    computed_ = false;
  }

 private:
  Corners corners(const float* b) const {
    if (center_) return {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
    return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
  }

  static bool overlaps(const Corners& a, const Corners& b, float threshold) {
    const float ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1), iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
    if (ih <= 0 || iw <= 0) return false;
    const float inter = ih * iw;
    const float area_a = (a.y2 - a.y1) * (a.x2 - a.x1), area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
    const float uni = area_a + area_b - inter;
    if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
    return inter / uni > threshold;
  }

  static float scalar(const KernelIO& io, size_t i, float fallback) {
    if (!io.has_in(i) || io.input(i).numel() == 0) return fallback;
    if (io.input(i).numel() != 1 || io.input(i).dtype != DType::kFloat)
      throw InputError("NonMaxSuppression's input " + std::to_string(i) + " must be one float");
    return io.input(i).as<float>()[0];
  }

  std::vector<int64_t> select(const KernelIO& io) const {
    const View &boxes = io.input(0), &scores = io.input(1);
    if (boxes.dtype != DType::kFloat || scores.dtype != DType::kFloat)
      throw InputError("NonMaxSuppression takes float boxes and scores");
    if (boxes.rank() != 3 || boxes.dims[2] != 4 || scores.rank() != 3 || scores.dims[0] != boxes.dims[0] ||
        scores.dims[2] != boxes.dims[1])
      throw InputError("NonMaxSuppression's boxes " + dims_str(boxes.dims) + " and scores " + dims_str(scores.dims) +
                       " must be [B, N, 4] and [B, C, N]");
    int64_t limit = 0;
    if (io.has_in(2) && io.input(2).numel() > 0) {
      const std::vector<int64_t> m = read_ints(io.input(2));
      if (m.size() != 1) throw InputError("NonMaxSuppression's max_output_boxes_per_class must be one integer");
      limit = m[0];
    }
    const float iou = scalar(io, 3, 0.0f);
    const bool has_floor = io.has_in(4) && io.input(4).numel() > 0;
    const float floor = scalar(io, 4, 0.0f);
    if (iou < 0 || iou > 1) throw InputError("NonMaxSuppression's iou_threshold must be in [0, 1]");
    const int64_t batches = boxes.dims[0], classes = scores.dims[1], n = boxes.dims[1];
    std::vector<int64_t> out;
    if (limit <= 0) return out;
    std::vector<int64_t> order;
    std::vector<Corners> kept;
    for (int64_t b = 0; b < batches; ++b)
      for (int64_t c = 0; c < classes; ++c) {
        const float* s = scores.as<float>() + (b * classes + c) * n;
        order.clear();
        for (int64_t i = 0; i < n; ++i)
          if (!has_floor || s[i] > floor) order.push_back(i);
        std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
        kept.clear();
        for (int64_t i : order) {
          if (static_cast<int64_t>(kept.size()) >= limit) break;
          const Corners box = corners(boxes.as<float>() + (b * n + i) * 4);
          if (std::any_of(kept.begin(), kept.end(), [&](const Corners& k) { return overlaps(k, box, iou); })) continue;
          kept.push_back(box);
          out.insert(out.end(), {b, c, i});
        }
      }
    return out;
  }

  bool center_;
  mutable std::vector<int64_t> selected_;  // from infer() to the run() after it
  mutable bool computed_ = false;
};

}  // namespace

const std::vector<OpEntry>& non_max_suppression_ops() {
  static const std::vector<OpEntry> ops = {{"NonMaxSuppression", make_kernel<NonMaxSuppression>, 1u << static_cast<int>(DType::kFloat), {}}};
  return ops;
}

}  // namespace amp::cpu
