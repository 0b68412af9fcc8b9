// Einsum on float types, any number of operands (MaxViT's attention: "BGHID,BGHJD->BGHIJ" and back):
// for each output element, the sum over the summed letters of the operands' product, accumulated
// in fp32 (fp64 for double) and rounded once, as GPU products accumulate. Plain loops: the zoo's
// einsums are small batched products; graph/ops/einsum.h parses the equation.
#include "backends/cpu/kernel_util.h"
#include "graph/ops/einsum.h"

namespace amp::cpu {
namespace {

class Einsum final : public Kernel {
 public:
  Einsum(const Node& n, int64_t) : equation_(n.attr_string("equation", "")), operands_(n.inputs().size()) {
    parse_einsum(equation_, operands_);  // refuses a bad equation when the model is compiled
  }
  size_t infer(KernelIO& io) const override {
    const EinsumEquation e = parse_einsum(equation_, io.in.size());
    std::vector<std::vector<int64_t>> dims;
    for (const View* v : io.in) {
      if (!v) throw InputError("Einsum inputs must all be present");
      if (v->dtype != io.in[0]->dtype) throw InputError("Einsum inputs have different element types");
      dims.push_back(v->dims);
    }
    io.output(0).dtype = io.in[0]->dtype;
    io.output(0).dims = einsum_output_dims(e, einsum_extents(e, dims));
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const EinsumEquation e = parse_einsum(equation_, io.in.size());
    std::vector<std::vector<int64_t>> dims;
    for (const View* v : io.in) dims.push_back(v->dims);
    const std::vector<int64_t> extent = einsum_extents(e, dims);
    const size_t n_out = e.output.size(), n_all = e.letters.size(), ops = io.in.size();
    // stride[k][l]: how far operand k moves when letter l moves by one.
    std::vector<std::vector<int64_t>> stride(ops, std::vector<int64_t>(n_all, 0));
    for (size_t k = 0; k < ops; ++k) {
      const std::vector<int64_t> s = strides_of(dims[k]);
      for (size_t i = 0; i < e.inputs[k].size(); ++i)
        if (dims[k][i] != 1 || extent[e.letters.find(e.inputs[k][i])] == 1) stride[k][e.letters.find(e.inputs[k][i])] += s[i];
    }
    int64_t summed = 1;
    for (size_t l = n_out; l < n_all; ++l) summed *= extent[l];
    View& y = io.output(0);
    dispatch(FloatTypes{}, y.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      std::vector<const T*> src;
      for (const View* v : io.in) src.push_back(v->as<T>());
      T* dst = y.as<T>();
      parallel_for(y.numel(), ctx.threads, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, summed)), [&](int64_t o0, int64_t o1) {
        std::vector<int64_t> base(ops), off(ops), idx(n_all);
        for (int64_t o = o0; o < o1; ++o) {
          int64_t rest = o;
          std::fill(base.begin(), base.end(), 0);
          for (size_t l = n_out; l-- > 0;) {
            const int64_t i = rest % extent[l];
            rest /= extent[l];
            for (size_t k = 0; k < ops; ++k) base[k] += i * stride[k][l];
          }
          std::fill(idx.begin(), idx.end(), 0);
          off = base;
          C acc = 0;
          for (int64_t s = 0; s < summed; ++s) {
            C p = 1;
            for (size_t k = 0; k < ops; ++k) p *= load(src[k][off[k]]);
            acc += p;
            // Next combination of the summed letters, the last moving fastest.
            for (size_t l = n_all; l-- > n_out;) {
              for (size_t k = 0; k < ops; ++k) off[k] += stride[k][l];
              if (++idx[l] < extent[l]) break;
              for (size_t k = 0; k < ops; ++k) off[k] -= stride[k][l] * extent[l];
              idx[l] = 0;
            }
          }
          dst[o] = store<T>(acc);
        }
      });
    });
  }

 private:
  std::string equation_;
  size_t operands_;
};

}  // namespace

const std::vector<OpEntry>& einsum_ops() {
  static const std::vector<OpEntry> ops = {{"Einsum", make_kernel<Einsum>, FloatTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
