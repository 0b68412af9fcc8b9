// LSTM, GRU and RNN (ONNX's recurrent layers, opset 14: Keras Conv1D + LSTM through keras2onnx,
// torch's nn.LSTM / nn.GRU / nn.RNN exports), and their gradients (ai.onnx_amp LSTMGrad, GRUGrad,
// RNNGrad: backpropagation through time). Forward, reverse and bidirectional; sequence_lens
// (steps past a sample's length leave its state alone and write zeros to Y, as ONNX Runtime does);
// initial states; LSTM's peepholes, input_forget and clip; GRU's linear_before_reset; every
// activation ONNX names, with activation_alpha / activation_beta consumed in order by the
// activations that take them (ONNX Runtime's reading of the spec); layout 0 and 1.
// Math in the compute type (fp32 for 16-bit tensors, which a GPU stores at each step: the
// hidden and cell states are rounded to the tensor type after every step, as Y holds them).
// Gate products are plain loops: these layers are small in the models that have them, and the
// step-to-step dependence leaves one [batch, hidden] x [hidden, gates] product per step.
//
// The gradient kernels run the forward again, keeping each step's states and gate
// pre-activations ((4 + gates) x hidden values a step), and walk the steps back. Recomputing costs
// one forward of the layer (a third of its training cost) and keeps nothing of the forward alive
// until the backward: what the forward would have to keep, [seq, directions, batch, 4 x hidden]
// for an LSTM, is four times its Y. The states' per-step rounding counts as the identity in the
// backward, as it does on a GPU.
#include <cmath>
#include <map>

#include "backends/cpu/grad_kernels.h"
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

  // The derivative at x; at a kink, PyTorch's side (Relu: 0 at 0; LeakyRelu and Elu: the right piece).
  template <class C>
  C derivative(C x) const {
    if (name == "Sigmoid" || name == "Softplus") {
      const C s = C(1) / (C(1) + std::exp(-x));
      return name == "Sigmoid" ? s * (C(1) - s) : s;
    }
    if (name == "Tanh") {
      const C t = std::tanh(x);
      return C(1) - t * t;
    }
    if (name == "Relu") return x > 0 ? C(1) : C(0);
    if (name == "HardSigmoid") {
      const C v = C(alpha) * x + C(beta);
      return v > 0 && v < 1 ? C(alpha) : C(0);
    }
    if (name == "LeakyRelu") return x < 0 ? C(alpha) : C(1);
    if (name == "ThresholdedRelu") return x > C(alpha) ? C(1) : C(0);
    if (name == "ScaledTanh") {
      const C t = std::tanh(C(beta) * x);
      return C(alpha) * C(beta) * (C(1) - t * t);
    }
    if (name == "Affine") return C(alpha);
    if (name == "Elu") return x < 0 ? C(alpha) * std::exp(x) : C(1);
    const C d = C(1) + std::fabs(x);  // Softsign
    return C(1) / (d * d);
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

// The layer's attributes, parsed once per node: what the forward and the gradient kernels share.
template <Cell kCell>
struct Layer {
  static constexpr int kGates = gates_of(kCell);
  int64_t hidden;
  float clip;
  bool batch_first, input_forget, linear_before_reset;
  std::vector<bool> directions;  // reverse?
  std::vector<Activation> activations;

  explicit Layer(const Node& n)
      : hidden(n.attr_int("hidden_size", 0)),
        clip(n.attr_float("clip", 0)),
        batch_first(n.attr_int("layout", 0) != 0),
        input_forget(n.attr_int("input_forget", 0) != 0),
        linear_before_reset(n.attr_int("linear_before_reset", 0) != 0) {
    const std::string direction = n.attr_string("direction", "forward");
    if (direction == "forward") directions = {false};
    else if (direction == "reverse") directions = {true};
    else if (direction == "bidirectional") directions = {false, true};
    else throw InputError("node " + n.label() + ": unknown direction '" + direction + "'");
    if (hidden <= 0) throw InputError("node " + n.label() + ": hidden_size must be positive");
    // f, g (and h for LSTM) per direction.
    const size_t per_direction = kCell == Cell::kLstm ? 3 : kCell == Cell::kGru ? 2 : 1;
    std::vector<std::string> names;
    if (const Attribute* a = n.attr("activations")) names = a->strings;
    if (names.empty()) {
      const std::vector<std::string> defaults = kCell == Cell::kLstm ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                                : kCell == Cell::kGru  ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                                       : std::vector<std::string>{"Tanh"};
      for (size_t d = 0; d < directions.size(); ++d) names.insert(names.end(), defaults.begin(), defaults.end());
    }
    if (names.size() != per_direction * directions.size())
      throw InputError("node " + n.label() + ": " + std::to_string(names.size()) + " activations, expected " +
                       std::to_string(per_direction * directions.size()));
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
      activations.push_back(act);
    }
  }

  // Activation k (f, g, h) of direction d.
  const Activation& activation(int64_t d, size_t k) const {
    const size_t per_direction = activations.size() / directions.size();
    return activations[std::min(static_cast<size_t>(d) * per_direction + k, activations.size() - 1)];
  }
};

// One step's record for the backward: h_{t-1}, c_{t-1} and c_t (LSTM), the gates' pre-activations
// before clipping, and GRU's R_h h_{t-1} + Rb_h (linear_before_reset).
template <class C, Cell kCell>
struct StepRecord {
  static constexpr int64_t size(int64_t H) { return (4 + gates_of(kCell)) * H; }
  static C* h_prev(C* r, int64_t) { return r; }
  static C* c_prev(C* r, int64_t H) { return r + H; }
  static C* c(C* r, int64_t H) { return r + 2 * H; }
  static C* pre(C* r, int64_t H) { return r + 3 * H; }
  static C* hg_h(C* r, int64_t H) { return r + (3 + gates_of(kCell)) * H; }
};

// The layer's inputs as one kernel call sees them, widened to the compute type C. The forward
// inputs X, W, R, B, sequence_lens, initial_h, initial_c, P are io's inputs from `first` on (0 for
// the forward op, after the output gradients for the gradient op).
template <Cell kCell, class T>
struct Operands {
  using C = compute_t<T>;
  static constexpr int kGates = gates_of(kCell);
  const Layer<kCell>& layer;
  int64_t seq, batch, in, H, dirs;
  std::vector<C> X, W, R, B, P, H0, C0;
  std::vector<int64_t> lengths;
  bool has_bias, has_h0, has_c0, has_peepholes;

  static std::vector<C> widen(const View& v) {
    std::vector<C> out(static_cast<size_t>(v.numel()));
    const T* p = v.as<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = load(p[i]);
    return out;
  }

  Operands(const Layer<kCell>& l, const KernelIO& io, size_t first) : layer(l) {
    const View& x = io.input(first);
    if (x.rank() != 3) throw InputError("X must be rank 3, got " + dims_str(x.dims));
    seq = x.dims[l.batch_first ? 1 : 0];
    batch = x.dims[l.batch_first ? 0 : 1];
    in = x.dims[2];
    H = l.hidden;
    dirs = static_cast<int64_t>(l.directions.size());
    auto expect = [&](size_t i, const char* what, std::vector<int64_t> dims) {
      if (!io.has_in(first + i)) return false;
      if (io.input(first + i).dims != dims)
        throw InputError(std::string(what) + " has shape " + dims_str(io.input(first + i).dims) + ", expected " + dims_str(dims));
      return true;
    };
    expect(1, "W", {dirs, kGates * H, in});
    expect(2, "R", {dirs, kGates * H, H});
    has_bias = expect(3, "B", {dirs, 2 * kGates * H});
    lengths.assign(static_cast<size_t>(batch), seq);
    if (io.has_in(first + 4)) {
      if (io.input(first + 4).dims != std::vector<int64_t>{batch})
        throw InputError("sequence_lens has shape " + dims_str(io.input(first + 4).dims) + ", expected [" + std::to_string(batch) + "]");
      lengths = read_ints(io.input(first + 4));
      for (int64_t len : lengths)
        if (len < 0 || len > seq) throw InputError("a sequence length of " + std::to_string(len) + " is outside [0, " + std::to_string(seq) + "]");
    }
    has_h0 = expect(5, "initial_h", state_dims());
    has_c0 = kCell == Cell::kLstm && expect(6, "initial_c", state_dims());
    has_peepholes = kCell == Cell::kLstm && expect(7, "P", {dirs, 3 * H});
    X = widen(x);
    W = widen(io.input(first + 1));
    R = widen(io.input(first + 2));
    B = has_bias ? widen(io.input(first + 3)) : std::vector<C>(static_cast<size_t>(dirs * 2 * kGates * H), 0);
    P = has_peepholes ? widen(io.input(first + 7)) : std::vector<C>(static_cast<size_t>(dirs * 3 * H), 0);
    H0 = has_h0 ? widen(io.input(first + 5)) : std::vector<C>(static_cast<size_t>(dirs * batch * H), 0);
    C0 = has_c0 ? widen(io.input(first + 6)) : std::vector<C>(static_cast<size_t>(dirs * batch * H), 0);
  }

  std::vector<int64_t> state_dims() const {
    return layer.batch_first ? std::vector<int64_t>{batch, dirs, H} : std::vector<int64_t>{dirs, batch, H};
  }
  // Element offsets in X (of x_t's first element), in the states and in Y, for both layouts.
  int64_t x_at(int64_t t, int64_t b) const { return (layer.batch_first ? (b * seq + t) : (t * batch + b)) * in; }
  int64_t state_at(int64_t d, int64_t b) const { return layer.batch_first ? (b * dirs + d) * H : (d * batch + b) * H; }
  int64_t y_at(int64_t t, int64_t d, int64_t b) const {
    return layer.batch_first ? ((b * seq + t) * dirs + d) * H : ((t * dirs + d) * batch + b) * H;
  }
  // The time step of processing step s of a sample of length len.
  int64_t time(int64_t d, int64_t s, int64_t len) const { return layer.directions[static_cast<size_t>(d)] ? len - 1 - s : s; }

  C clipped(C v) const { return layer.clip > 0 ? std::max(C(-layer.clip), std::min(C(layer.clip), v)) : v; }
  // The clip's derivative: 1 inside [-clip, clip] (its ends included, as PyTorch's clamp).
  C clip_passes(C v) const { return layer.clip > 0 && (v < C(-layer.clip) || v > C(layer.clip)) ? C(0) : C(1); }

  // Runs direction d of sample b from its initial state: hs and cs (H each) end as the final
  // states; y(t, h) receives each step's output; record, when given, each step's StepRecord.
  template <class Y>
  void forward(int64_t d, int64_t b, C* hs, C* cs, Y&& y, C* record) const {
    using Rec = StepRecord<C, kCell>;
    const C* w = W.data() + d * kGates * H * in;
    const C* r = R.data() + d * kGates * H * H;
    const C* wb = B.data() + d * 2 * kGates * H;
    const C* rb = wb + kGates * H;
    const C* p = P.data() + d * 3 * H;
    const Activation &f = layer.activation(d, 0), &g = layer.activation(d, 1), &h = layer.activation(d, 2);
    std::vector<C> xg(static_cast<size_t>(kGates * H)), hg(xg.size()), next(static_cast<size_t>(H)), reset(next.size());
    for (int64_t j = 0; j < H; ++j) {
      hs[j] = H0[static_cast<size_t>(state_at(d, b) + j)];
      cs[j] = C0[static_cast<size_t>(state_at(d, b) + j)];
    }
    auto round = [](C v) { return load(store<T>(v)); };  // the state as the tensor type holds it
    const int64_t len = lengths[static_cast<size_t>(b)];
    for (int64_t s = 0; s < len; ++s) {
      const int64_t t = time(d, s, len);
      const C* xt = X.data() + x_at(t, b);
      C* rec = record ? record + s * Rec::size(H) : nullptr;
      // xg = W x_t + Wb, hg = R h_{t-1} + Rb (GRU's h gate: R (r . h) or r . (R h + Rb), below).
      for (int64_t k = 0; k < kGates * H; ++k) {
        C sx = 0, sh = 0;
        for (int64_t i = 0; i < in; ++i) sx += w[k * in + i] * xt[i];
        for (int64_t i = 0; i < H; ++i) sh += r[k * H + i] * hs[i];
        xg[static_cast<size_t>(k)] = sx + wb[k];
        hg[static_cast<size_t>(k)] = sh + rb[k];
      }
      if (rec)
        for (int64_t j = 0; j < H; ++j) {
          Rec::h_prev(rec, H)[j] = hs[j];
          Rec::c_prev(rec, H)[j] = cs[j];
        }
      C* pre = rec ? Rec::pre(rec, H) : nullptr;
      auto keep = [&](int64_t k, C v) {
        if (pre) pre[k] = v;
        return v;
      };
      if constexpr (kCell == Cell::kLstm) {
        for (int64_t j = 0; j < H; ++j) {  // gates i, o, f, c
          const C c_prev = cs[j];
          const C i_gate = f(clipped(keep(j, xg[j] + hg[j] + p[j] * c_prev)));
          const C f_pre = keep(2 * H + j, xg[2 * H + j] + hg[2 * H + j] + p[2 * H + j] * c_prev);
          const C f_gate = layer.input_forget ? C(1) - i_gate : f(clipped(f_pre));
          const C c_gate = g(clipped(keep(3 * H + j, xg[3 * H + j] + hg[3 * H + j])));
          const C c_new = round(f_gate * c_prev + i_gate * c_gate);
          const C o_gate = f(clipped(keep(H + j, xg[H + j] + hg[H + j] + p[H + j] * c_new)));
          cs[j] = c_new;
          if (rec) Rec::c(rec, H)[j] = c_new;
          next[static_cast<size_t>(j)] = round(o_gate * h(c_new));
        }
      } else if constexpr (kCell == Cell::kGru) {
        for (int64_t j = 0; j < H; ++j)  // gates z, r, h
          reset[static_cast<size_t>(j)] = f(clipped(keep(H + j, xg[H + j] + hg[H + j])));
        for (int64_t j = 0; j < H; ++j) {
          const C z = f(clipped(keep(j, xg[j] + hg[j])));
          C recurrent;
          if (layer.linear_before_reset) {
            recurrent = reset[static_cast<size_t>(j)] * hg[2 * H + j];
            if (rec) Rec::hg_h(rec, H)[j] = hg[2 * H + j];
          } else {
            C sum = 0;
            for (int64_t i = 0; i < H; ++i) sum += r[(2 * H + j) * H + i] * (reset[static_cast<size_t>(i)] * hs[i]);
            recurrent = sum + rb[2 * H + j];
          }
          const C candidate = g(clipped(keep(2 * H + j, xg[2 * H + j] + recurrent)));
          next[static_cast<size_t>(j)] = round((C(1) - z) * candidate + z * hs[j]);
        }
      } else {
        for (int64_t j = 0; j < H; ++j) next[static_cast<size_t>(j)] = round(f(clipped(keep(j, xg[j] + hg[j]))));
      }
      for (int64_t j = 0; j < H; ++j) hs[j] = next[static_cast<size_t>(j)];
      y(t, hs);
    }
  }
};

template <Cell kCell>
class Recurrent final : public Kernel {
 public:
  Recurrent(const Node& n, int64_t) : layer_(n) {}

  void run(KernelIO& io, const RunContext&) const override {
    dispatch(FloatTypes{}, io.input(0).dtype, [&](auto tag) { compute<typename decltype(tag)::type>(io); });
  }

 private:
  template <class T>
  void compute(KernelIO& io) const {
    using C = compute_t<T>;
    const Operands<kCell, T> op(layer_, io, 0);
    const int64_t H = op.H;
    T* Y = io.has_out(0) ? io.output(0).as<T>() : nullptr;
    if (Y) std::fill(Y, Y + io.output(0).numel(), store<T>(C(0)));
    std::vector<C> Hs(static_cast<size_t>(op.dirs * op.batch * H)), Cs(Hs.size());
    for (int64_t d = 0; d < op.dirs; ++d)
      for (int64_t b = 0; b < op.batch; ++b) {
        C* hs = Hs.data() + (d * op.batch + b) * H;
        C* cs = Cs.data() + (d * op.batch + b) * H;
        op.forward(d, b, hs, cs, [&](int64_t t, const C* h) {
          if (Y)
            for (int64_t j = 0; j < H; ++j) Y[op.y_at(t, d, b) + j] = store<T>(h[j]);
        }, nullptr);
      }
    auto write_state = [&](size_t k, const std::vector<C>& state) {
      if (!io.has_out(k)) return;
      T* out = io.output(k).as<T>();
      for (int64_t d = 0; d < op.dirs; ++d)
        for (int64_t b = 0; b < op.batch; ++b)
          for (int64_t j = 0; j < H; ++j) out[op.state_at(d, b) + j] = store<T>(state[static_cast<size_t>((d * op.batch + b) * H + j)]);
    };
    write_state(1, Hs);
    if constexpr (kCell == Cell::kLstm) write_state(2, Cs);
  }

  Layer<kCell> layer_;
};

// ai.onnx_amp LSTMGrad(dY, dY_h, dY_c, X, W, R, B, sequence_lens, initial_h, initial_c, P)
//   -> dX, dW, dR, dB, d_initial_h, d_initial_c, dP
// GRUGrad / RNNGrad(dY, dY_h, X, W, R, B, sequence_lens, initial_h) -> dX, dW, dR, dB, d_initial_h
// Every output gradient and every result optional; the forward's attributes.
template <Cell kCell>
class RecurrentGrad final : public Kernel {
 public:
  static constexpr size_t kOutputGrads = kCell == Cell::kLstm ? 3 : 2;  // dY, dY_h (, dY_c)

  RecurrentGrad(const Node& n, int64_t) : layer_(n) {}

  void run(KernelIO& io, const RunContext&) const override {
    dispatch(FloatTypes{}, io.input(kOutputGrads).dtype, [&](auto tag) { backward<typename decltype(tag)::type>(io); });
  }

 private:
  template <class T>
  void backward(KernelIO& io) const {
    using C = compute_t<T>;
    using Rec = StepRecord<C, kCell>;
    constexpr int kGates = gates_of(kCell);
    const Operands<kCell, T> op(layer_, io, kOutputGrads);
    const int64_t H = op.H, in = op.in, G = kGates * H, dirs = op.dirs, batch = op.batch;
    auto gradient_of = [&](size_t k, const std::vector<int64_t>& dims, const char* what) {
      if (!io.has_in(k)) return std::vector<C>();
      if (io.input(k).dims != dims || io.input(k).dtype != io.input(kOutputGrads).dtype)
        throw InputError(std::string(what) + " is " + std::string(dtype_name(io.input(k).dtype)) + dims_str(io.input(k).dims) +
                         ", expected " + std::string(dtype_name(io.input(kOutputGrads).dtype)) + dims_str(dims));
      return Operands<kCell, T>::widen(io.input(k));
    };
    const std::vector<int64_t> y_dims = layer_.batch_first ? std::vector<int64_t>{batch, op.seq, dirs, H}
                                                           : std::vector<int64_t>{op.seq, dirs, batch, H};
    const std::vector<C> dY = gradient_of(0, y_dims, "dY");
    const std::vector<C> dYh = gradient_of(1, op.state_dims(), "dY_h");
    const std::vector<C> dYc = kCell == Cell::kLstm ? gradient_of(2, op.state_dims(), "dY_c") : std::vector<C>();
    std::vector<C> dX(op.X.size(), 0), dW(op.W.size(), 0), dR(op.R.size(), 0), dB(op.B.size(), 0), dP(op.P.size(), 0),
        dH0(op.H0.size(), 0), dC0(op.C0.size(), 0);

    std::vector<C> record(static_cast<size_t>(op.seq * Rec::size(H))), hs(static_cast<size_t>(H)), cs(hs.size());
    std::vector<C> dh(hs.size()), dc(hs.size()), dh_prev(hs.size()), dc_prev(hs.size()), reset(hs.size());
    std::vector<C> dxg(static_cast<size_t>(G)), dhg(dxg.size());
    for (int64_t d = 0; d < dirs; ++d) {
      const C* w = op.W.data() + d * G * in;
      const C* r = op.R.data() + d * G * H;
      const C* p = op.P.data() + d * 3 * H;
      C* dw = dW.data() + d * G * in;
      C* dr = dR.data() + d * G * H;
      C* dwb = dB.data() + d * 2 * G;
      C* drb = dwb + G;
      C* dp = dP.data() + d * 3 * H;
      const Activation &f = layer_.activation(d, 0), &g = layer_.activation(d, 1), &h = layer_.activation(d, 2);
      for (int64_t b = 0; b < batch; ++b) {
        op.forward(d, b, hs.data(), cs.data(), [](int64_t, const C*) {}, record.data());
        const int64_t len = op.lengths[static_cast<size_t>(b)], state = op.state_at(d, b);
        for (int64_t j = 0; j < H; ++j) {
          dh[static_cast<size_t>(j)] = dYh.empty() ? C(0) : dYh[static_cast<size_t>(state + j)];
          dc[static_cast<size_t>(j)] = dYc.empty() ? C(0) : dYc[static_cast<size_t>(state + j)];
        }
        for (int64_t s = len - 1; s >= 0; --s) {
          const int64_t t = op.time(d, s, len);
          C* rec = record.data() + s * Rec::size(H);
          const C* h_prev = Rec::h_prev(rec, H);
          const C* pre = Rec::pre(rec, H);
          if (!dY.empty())
            for (int64_t j = 0; j < H; ++j) dh[static_cast<size_t>(j)] += dY[static_cast<size_t>(op.y_at(t, d, b) + j)];
          // dxg: the gradient of W x_t + Wb; dhg: of R's product with its input rin plus Rb.
          for (int64_t j = 0; j < H; ++j) dh_prev[static_cast<size_t>(j)] = 0;
          if constexpr (kCell == Cell::kLstm) {
            const C* c_prev = Rec::c_prev(rec, H);
            const C* c = Rec::c(rec, H);
            for (int64_t j = 0; j < H; ++j) {
              const size_t J = static_cast<size_t>(j);
              const C a_i = pre[j], a_o = pre[H + j], a_f = pre[2 * H + j], a_c = pre[3 * H + j];
              const C i_gate = f(op.clipped(a_i)), o_gate = f(op.clipped(a_o)), c_gate = g(op.clipped(a_c));
              const C f_gate = layer_.input_forget ? C(1) - i_gate : f(op.clipped(a_f));
              const C da_o = dh[J] * h(c[j]) * f.derivative(op.clipped(a_o)) * op.clip_passes(a_o);
              const C dcell = dc[J] + dh[J] * o_gate * h.derivative(c[j]) + da_o * p[H + j];
              C di = dcell * c_gate;
              const C df = dcell * c_prev[j];
              C da_f = 0;
              if (layer_.input_forget) di -= df;
              else da_f = df * f.derivative(op.clipped(a_f)) * op.clip_passes(a_f);
              const C da_i = di * f.derivative(op.clipped(a_i)) * op.clip_passes(a_i);
              const C da_c = dcell * i_gate * g.derivative(op.clipped(a_c)) * op.clip_passes(a_c);
              dc_prev[J] = dcell * f_gate + da_i * p[j] + da_f * p[2 * H + j];
              dp[j] += da_i * c_prev[j];
              dp[H + j] += da_o * c[j];
              dp[2 * H + j] += da_f * c_prev[j];
              dxg[J] = da_i;
              dxg[static_cast<size_t>(H + j)] = da_o;
              dxg[static_cast<size_t>(2 * H + j)] = da_f;
              dxg[static_cast<size_t>(3 * H + j)] = da_c;
            }
            dhg = dxg;
          } else if constexpr (kCell == Cell::kGru) {
            const C* hg_h = Rec::hg_h(rec, H);
            for (int64_t j = 0; j < H; ++j) reset[static_cast<size_t>(j)] = f(op.clipped(pre[H + j]));
            for (int64_t j = 0; j < H; ++j) {
              const size_t J = static_cast<size_t>(j);
              const C z = f(op.clipped(pre[j]));
              const C candidate = g(op.clipped(pre[2 * H + j]));
              dxg[J] = dh[J] * (h_prev[j] - candidate) * f.derivative(op.clipped(pre[j])) * op.clip_passes(pre[j]);
              dxg[static_cast<size_t>(2 * H + j)] =
                  dh[J] * (C(1) - z) * g.derivative(op.clipped(pre[2 * H + j])) * op.clip_passes(pre[2 * H + j]);
              dh_prev[J] = dh[J] * z;
            }
            // The reset gate's gradient, through R_h (r . h) or r . (R_h h + Rb_h).
            for (int64_t j = 0; j < H; ++j) {
              const size_t J = static_cast<size_t>(j);
              C d_reset;
              if (layer_.linear_before_reset) {
                d_reset = dxg[static_cast<size_t>(2 * H + j)] * hg_h[j];
              } else {
                C sum = 0;  // du = R_h^T da_h, u = r . h_{t-1}
                for (int64_t k = 0; k < H; ++k) sum += r[(2 * H + k) * H + j] * dxg[static_cast<size_t>(2 * H + k)];
                d_reset = sum * h_prev[j];
                dh_prev[J] += sum * reset[J];
              }
              dxg[static_cast<size_t>(H + j)] = d_reset * f.derivative(op.clipped(pre[H + j])) * op.clip_passes(pre[H + j]);
            }
            dhg = dxg;
            if (layer_.linear_before_reset)
              for (int64_t j = 0; j < H; ++j) dhg[static_cast<size_t>(2 * H + j)] *= reset[static_cast<size_t>(j)];
          } else {
            for (int64_t j = 0; j < H; ++j)
              dxg[static_cast<size_t>(j)] = dh[static_cast<size_t>(j)] * f.derivative(op.clipped(pre[j])) * op.clip_passes(pre[j]);
            dhg = dxg;
          }
          // W's side: dW += dxg x_t^T, dWb += dxg, dX_t += W^T dxg.
          const C* xt = op.X.data() + op.x_at(t, b);
          C* dxt = dX.data() + op.x_at(t, b);
          for (int64_t k = 0; k < G; ++k) {
            const C gk = dxg[static_cast<size_t>(k)];
            dwb[k] += gk;
            if (gk == C(0)) continue;
            for (int64_t i = 0; i < in; ++i) {
              dw[k * in + i] += gk * xt[i];
              dxt[i] += w[k * in + i] * gk;
            }
          }
          // R's side: dR += dhg rin^T, dRb += dhg, dh_{t-1} += R^T dhg, rin = h_{t-1} except for
          // GRU's h gate without linear_before_reset, whose R reads r . h_{t-1} (done above).
          const bool gru_u = kCell == Cell::kGru && !layer_.linear_before_reset;
          for (int64_t k = 0; k < G; ++k) {
            const C gk = dhg[static_cast<size_t>(k)];
            drb[k] += gk;
            if (gk == C(0)) continue;
            const bool u_row = gru_u && k >= 2 * H;
            for (int64_t i = 0; i < H; ++i) {
              if (u_row) {
                dr[k * H + i] += gk * (reset[static_cast<size_t>(i)] * h_prev[i]);
              } else {
                dr[k * H + i] += gk * h_prev[i];
                dh_prev[static_cast<size_t>(i)] += r[k * H + i] * gk;
              }
            }
          }
          dh.swap(dh_prev);
          if constexpr (kCell == Cell::kLstm) dc.swap(dc_prev);
        }
        for (int64_t j = 0; j < H; ++j) {
          dH0[static_cast<size_t>(state + j)] = dh[static_cast<size_t>(j)];
          dC0[static_cast<size_t>(state + j)] = dc[static_cast<size_t>(j)];
        }
      }
    }
    auto write = [&](size_t k, const std::vector<C>& v) {
      if (!io.has_out(k)) return;
      View& out = io.output(k);
      if (static_cast<size_t>(out.numel()) != v.size())
        throw InputError("output " + std::to_string(k) + " has " + std::to_string(out.numel()) + " elements, expected " +
                         std::to_string(v.size()));
      T* o = out.as<T>();
      for (size_t i = 0; i < v.size(); ++i) o[i] = store<T>(v[i]);
    };
    write(0, dX);
    write(1, dW);
    write(2, dR);
    write(3, dB);
    write(4, dH0);
    if constexpr (kCell == Cell::kLstm) {
      write(5, dC0);
      write(6, dP);
    }
  }

  Layer<kCell> layer_;
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

const std::vector<OpEntry>& recurrent_grad_ops() {
  static const std::vector<OpEntry> ops = {
      {"LSTMGrad", make_kernel<RecurrentGrad<Cell::kLstm>>, FloatTypes::mask(), {}},
      {"GRUGrad", make_kernel<RecurrentGrad<Cell::kGru>>, FloatTypes::mask(), {}},
      {"RNNGrad", make_kernel<RecurrentGrad<Cell::kRnn>>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
