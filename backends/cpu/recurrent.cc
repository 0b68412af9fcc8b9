// LSTM, GRU and RNN (ONNX's recurrent layers, opset 14: Keras Conv1D + LSTM through keras2onnx,
// torch's nn.LSTM / nn.GRU / nn.RNN exports). Forward, reverse and bidirectional; sequence_lens
// (steps past a sample's length leave its state alone and write zeros to Y, as ONNX Runtime does);
// initial states; LSTM's peepholes, input_forget and clip; GRU's linear_before_reset; every
// activation ONNX names, with activation_alpha / activation_beta consumed in order by the
// activations that take them (ONNX Runtime's reading of the spec); layout 0 and 1.
// Math in the compute type (fp32 for 16-bit tensors, which a GPU stores at each step: the
// hidden and cell states are rounded to the tensor type after every step, as Y holds them).
// Gate products are plain loops: these layers are small in the models that have them, and the
// step-to-step dependence leaves one [batch, hidden] x [hidden, gates] product per step.
#include <cmath>
#include <functional>
#include <map>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

enum class Cell { kLstm, kGru, kRnn };

constexpr int gates_of(Cell c) { return c == Cell::kLstm ? 4 : c == Cell::kGru ? 3 : 1; }

// An activation with its alpha and beta.
struct Activation {
  std::string name;
  float alpha = 0, beta = 0;

  template <class C>
  C operator()(C x) const {
    if (name == "Sigmoid") return C(1) / (C(1) + std::exp(-x));
    if (name == "Tanh") return std::tanh(x);
    if (name == "Relu") return x < 0 ? C(0) : x;
    if (name == "HardSigmoid") return std::max(C(0), std::min(C(1), C(alpha) * x + C(beta)));
    if (name == "LeakyRelu") return x < 0 ? C(alpha) * x : x;
    if (name == "ThresholdedRelu") return x > C(alpha) ? x : C(0);
    if (name == "ScaledTanh") return C(alpha) * std::tanh(C(beta) * x);
    if (name == "Affine") return C(alpha) * x + C(beta);
    if (name == "Elu") return x < 0 ? C(alpha) * (std::exp(x) - C(1)) : x;
    if (name == "Softsign") return x / (C(1) + std::fabs(x));
    return std::log1p(std::exp(x));  // Softplus (the constructor admits no other name)
  }
};

// Which activations read activation_alpha and activation_beta, and ONNX's defaults for them.
struct ActivationParams {
  bool alpha, beta;
  float alpha_default, beta_default;
};
const std::map<std::string, ActivationParams> kActivations = {
    {"Sigmoid", {false, false, 0, 0}},       {"Tanh", {false, false, 0, 0}},
    {"Relu", {false, false, 0, 0}},          {"HardSigmoid", {true, true, 0.2f, 0.5f}},
    {"LeakyRelu", {true, false, 0.01f, 0}},  {"ThresholdedRelu", {true, false, 1.0f, 0}},
    {"ScaledTanh", {true, true, 1.0f, 1.0f}}, {"Affine", {true, true, 1.0f, 0}},
    {"Elu", {true, false, 1.0f, 0}},         {"Softsign", {false, false, 0, 0}},
    {"Softplus", {false, false, 0, 0}},
};

template <Cell kCell>
class Recurrent final : public Kernel {
 public:
  Recurrent(const Node& n, int64_t)
      : hidden_(n.attr_int("hidden_size", 0)),
        clip_(n.attr_float("clip", 0)),
        batch_first_(n.attr_int("layout", 0) != 0),
        input_forget_(n.attr_int("input_forget", 0) != 0),
        linear_before_reset_(n.attr_int("linear_before_reset", 0) != 0) {
    const std::string direction = n.attr_string("direction", "forward");
    if (direction == "forward") directions_ = {false};
    else if (direction == "reverse") directions_ = {true};
    else if (direction == "bidirectional") directions_ = {false, true};
    else throw InputError("node " + n.label() + ": unknown direction '" + direction + "'");
    if (hidden_ <= 0) throw InputError("node " + n.label() + ": hidden_size must be positive");
    // f, g (and h for LSTM) per direction.
    const size_t per_direction = kCell == Cell::kLstm ? 3 : kCell == Cell::kGru ? 2 : 1;
    std::vector<std::string> names;
    if (const Attribute* a = n.attr("activations")) names = a->strings;
    if (names.empty()) {
      const std::vector<std::string> defaults = kCell == Cell::kLstm ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                                : kCell == Cell::kGru  ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                                       : std::vector<std::string>{"Tanh"};
      for (size_t d = 0; d < directions_.size(); ++d) names.insert(names.end(), defaults.begin(), defaults.end());
    }
    if (names.size() != per_direction * directions_.size())
      throw InputError("node " + n.label() + ": " + std::to_string(names.size()) + " activations, expected " +
                       std::to_string(per_direction * directions_.size()));
    std::vector<float> alphas, betas;
    if (const Attribute* a = n.attr("activation_alpha")) alphas = a->floats;
    if (const Attribute* a = n.attr("activation_beta")) betas = a->floats;
    size_t next_alpha = 0, next_beta = 0;
    for (const std::string& name : names) {
      auto it = kActivations.find(name);
      if (it == kActivations.end()) throw InputError("node " + n.label() + ": unknown activation '" + name + "'");
      Activation act{name, it->second.alpha_default, it->second.beta_default};
      if (it->second.alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
      if (it->second.beta && next_beta < betas.size()) act.beta = betas[next_beta++];
      activations_.push_back(act);
    }
  }

  void run(KernelIO& io, const RunContext&) const override {
    const View& x = io.input(0);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) { compute<typename decltype(tag)::type>(io); });
  }

 private:
  template <class T>
  void compute(KernelIO& io) const {
    using C = compute_t<T>;
    constexpr int kGates = gates_of(kCell);
    const View& x = io.input(0);
    const int64_t seq = x.dims[batch_first_ ? 1 : 0], batch = x.dims[batch_first_ ? 0 : 1], in = x.dims[2];
    const int64_t H = hidden_, dirs = static_cast<int64_t>(directions_.size());
    auto expect = [&](size_t i, const char* what, std::vector<int64_t> dims) {
      if (!io.has_in(i)) return false;
      if (io.input(i).dims != dims)
        throw InputError(std::string(what) + " has shape " + dims_str(io.input(i).dims) + ", expected " + dims_str(dims));
      return true;
    };
    expect(1, "W", {dirs, kGates * H, in});
    expect(2, "R", {dirs, kGates * H, H});
    const bool has_bias = expect(3, "B", {dirs, 2 * kGates * H});
    std::vector<int64_t> lengths(static_cast<size_t>(batch), seq);
    if (io.has_in(4)) {
      if (io.input(4).dims != std::vector<int64_t>{batch})
        throw InputError("sequence_lens has shape " + dims_str(io.input(4).dims) + ", expected [" + std::to_string(batch) + "]");
      lengths = read_ints(io.input(4));
      for (int64_t l : lengths)
        if (l < 0 || l > seq) throw InputError("a sequence length of " + std::to_string(l) + " is outside [0, " + std::to_string(seq) + "]");
    }
    const std::vector<int64_t> state_dims = batch_first_ ? std::vector<int64_t>{batch, dirs, H} : std::vector<int64_t>{dirs, batch, H};
    const bool has_h0 = expect(5, "initial_h", state_dims);
    const bool has_c0 = kCell == Cell::kLstm && expect(6, "initial_c", state_dims);
    const bool has_peepholes = kCell == Cell::kLstm && expect(7, "P", {dirs, 3 * H});

    auto widen_all = [](const View& v) {
      std::vector<C> out(static_cast<size_t>(v.numel()));
      const T* p = v.as<T>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = load(p[i]);
      return out;
    };
    const std::vector<C> X = widen_all(x), W = widen_all(io.input(1)), R = widen_all(io.input(2));
    const std::vector<C> B = has_bias ? widen_all(io.input(3)) : std::vector<C>(static_cast<size_t>(dirs * 2 * kGates * H), 0);
    const std::vector<C> P = has_peepholes ? widen_all(io.input(7)) : std::vector<C>(static_cast<size_t>(dirs * 3 * H), 0);
    const std::vector<C> H0 = has_h0 ? widen_all(io.input(5)) : std::vector<C>(static_cast<size_t>(dirs * batch * H), 0);
    const std::vector<C> C0 = has_c0 ? widen_all(io.input(6)) : std::vector<C>(static_cast<size_t>(dirs * batch * H), 0);
    // Index helpers for the two layouts.
    auto x_at = [&](int64_t t, int64_t b) { return X.data() + (batch_first_ ? (b * seq + t) : (t * batch + b)) * in; };
    auto state_at = [&](int64_t d, int64_t b) { return batch_first_ ? (b * dirs + d) * H : (d * batch + b) * H; };
    auto y_at = [&](int64_t t, int64_t d, int64_t b) {
      return batch_first_ ? ((b * seq + t) * dirs + d) * H : ((t * dirs + d) * batch + b) * H;
    };
    T* Y = io.has_out(0) ? io.output(0).as<T>() : nullptr;
    if (Y) std::fill(Y, Y + io.output(0).numel(), store<T>(C(0)));
    std::vector<C> Hs(static_cast<size_t>(dirs * batch * H)), Cs(Hs.size());
    auto round = [](C v) { return load(store<T>(v)); };  // the state as the tensor type holds it
    const size_t per_direction = activations_.size() / static_cast<size_t>(dirs);

    for (int64_t d = 0; d < dirs; ++d) {
      const bool reverse = directions_[static_cast<size_t>(d)];
      const C* w = W.data() + d * kGates * H * in;
      const C* r = R.data() + d * kGates * H * H;
      const C* wb = B.data() + d * 2 * kGates * H;
      const C* rb = wb + kGates * H;
      const C* p = P.data() + d * 3 * H;
      const Activation& f = activations_[static_cast<size_t>(d) * per_direction];
      const Activation& g = activations_[std::min(static_cast<size_t>(d) * per_direction + 1, activations_.size() - 1)];
      const Activation& h = activations_[std::min(static_cast<size_t>(d) * per_direction + 2, activations_.size() - 1)];
      std::vector<C> xg(static_cast<size_t>(kGates * H)), hg(xg.size()), prev(static_cast<size_t>(H)), update(prev.size()),
          reset(prev.size());
      for (int64_t b = 0; b < batch; ++b) {
        C* hs = Hs.data() + (d * batch + b) * H;
        C* cs = Cs.data() + (d * batch + b) * H;
        for (int64_t j = 0; j < H; ++j) {
          hs[j] = H0[static_cast<size_t>(state_at(d, b) + j)];
          cs[j] = C0[static_cast<size_t>(state_at(d, b) + j)];
        }
        const int64_t len = lengths[static_cast<size_t>(b)];
        for (int64_t s = 0; s < len; ++s) {
          const int64_t t = reverse ? len - 1 - s : s;
          const C* xt = x_at(t, b);
          // xg = W x_t + Wb, hg = R h_{t-1} + Rb (GRU's h gate: R (r . h) or r . (R h + Rb), below).
          for (int64_t k = 0; k < kGates * H; ++k) {
            C sx = 0, sh = 0;
            for (int64_t i = 0; i < in; ++i) sx += w[k * in + i] * xt[i];
            for (int64_t i = 0; i < H; ++i) sh += r[k * H + i] * hs[i];
            xg[static_cast<size_t>(k)] = sx + wb[k];
            hg[static_cast<size_t>(k)] = sh + rb[k];
          }
          auto clipped = [&](C v) { return clip_ > 0 ? std::max(C(-clip_), std::min(C(clip_), v)) : v; };
          if constexpr (kCell == Cell::kLstm) {
            for (int64_t j = 0; j < H; ++j) {  // gates i, o, f, c
              const C c_prev = cs[j];
              const C i_gate = f(clipped(xg[j] + hg[j] + p[j] * c_prev));
              const C f_gate = input_forget_ ? C(1) - i_gate : f(clipped(xg[2 * H + j] + hg[2 * H + j] + p[2 * H + j] * c_prev));
              const C c_gate = g(clipped(xg[3 * H + j] + hg[3 * H + j]));
              const C c_new = round(f_gate * c_prev + i_gate * c_gate);
              const C o_gate = f(clipped(xg[H + j] + hg[H + j] + p[H + j] * c_new));
              cs[j] = c_new;
              prev[static_cast<size_t>(j)] = round(o_gate * h(c_new));
            }
          } else if constexpr (kCell == Cell::kGru) {
            std::vector<C>& z = update, &rg = reset;
            for (int64_t j = 0; j < H; ++j) {  // gates z, r, h
              z[static_cast<size_t>(j)] = f(clipped(xg[j] + hg[j]));
              rg[static_cast<size_t>(j)] = f(clipped(xg[H + j] + hg[H + j]));
            }
            for (int64_t j = 0; j < H; ++j) {
              C recurrent;
              if (linear_before_reset_) {
                recurrent = rg[static_cast<size_t>(j)] * hg[2 * H + j];
              } else {
                C sum = 0;
                for (int64_t i = 0; i < H; ++i) sum += r[(2 * H + j) * H + i] * (rg[static_cast<size_t>(i)] * hs[i]);
                recurrent = sum + rb[2 * H + j];
              }
              const C candidate = g(clipped(xg[2 * H + j] + recurrent));
              prev[static_cast<size_t>(j)] = round((C(1) - z[static_cast<size_t>(j)]) * candidate + z[static_cast<size_t>(j)] * hs[j]);
            }
          } else {
            for (int64_t j = 0; j < H; ++j) prev[static_cast<size_t>(j)] = round(f(clipped(xg[j] + hg[j])));
          }
          for (int64_t j = 0; j < H; ++j) hs[j] = prev[static_cast<size_t>(j)];
          if (Y)
            for (int64_t j = 0; j < H; ++j) Y[y_at(t, d, b) + j] = store<T>(hs[j]);
        }
      }
    }
    auto write_state = [&](size_t k, const std::vector<C>& state) {
      if (!io.has_out(k)) return;
      T* out = io.output(k).as<T>();
      for (int64_t d = 0; d < dirs; ++d)
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t j = 0; j < H; ++j) out[state_at(d, b) + j] = store<T>(state[static_cast<size_t>((d * batch + b) * H + j)]);
    };
    write_state(1, Hs);
    if constexpr (kCell == Cell::kLstm) write_state(2, Cs);
  }

  int64_t hidden_;
  float clip_;
  bool batch_first_, input_forget_, linear_before_reset_;
  std::vector<bool> directions_;  // reverse?
  std::vector<Activation> activations_;
};

}  // namespace

const std::vector<OpEntry>& recurrent_ops() {
  static const std::vector<OpEntry> ops = {
      {"LSTM", make_kernel<Recurrent<Cell::kLstm>>, FloatTypes::mask(), {}},
      {"GRU", make_kernel<Recurrent<Cell::kGru>>, FloatTypes::mask(), {}},
      {"RNN", make_kernel<Recurrent<Cell::kRnn>>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
