#include "graph/onnx_runtime_contrib_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "graph/error.h"
#include "graph/onnx_proto_edit.h"
#include "graph/onnx_value_types.h"

namespace amp {
namespace {

using onnx::AttributeProto;
using onnx::GraphProto;
using onnx::NodeProto;
using onnx::TensorProto;

bool is_ms_domain(const std::string& d) { return d == "com.microsoft"; }
std::string input(const NodeProto& n, int i) { return i < n.input_size() ? n.input(i) : std::string(); }
std::string output(const NodeProto& n, int i) { return i < n.output_size() ? n.output(i) : std::string(); }

class ContribExpansion {
 public:
  ContribExpansion(onnx::ModelProto& p, std::string path) : p_(p), path_(std::move(path)) {
    for (const auto& o : p.opset_import())
      if (proto::default_domain(o.domain())) opset_ = o.version();
  }

  std::string run() {
    names_.collect(p_.graph());
    each_graph(*p_.mutable_graph(), [&](GraphProto& g) { expand(g); });
    if (counts_.empty()) return "";
    bool still_read = false;
    each_graph(*p_.mutable_graph(), [&](GraphProto& g) {
      for (const auto& n : g.node()) still_read = still_read || is_ms_domain(n.domain());
    });
    auto* imports = p_.mutable_opset_import();
    if (!still_read)
      for (int i = imports->size() - 1; i >= 0; --i)
        if (is_ms_domain(imports->Get(i).domain())) imports->DeleteSubrange(i, 1);
    // A model of contrib ops alone may import no default domain: the new nodes need one.
    if (opset_ == 0) {
      auto* o = p_.add_opset_import();
      o->set_domain("");
      o->set_version(17);
      p_.set_ir_version(std::max<int64_t>(p_.ir_version(), 8));
    }
    std::string said;
    for (const auto& [op, count] : counts_) said += (said.empty() ? "" : ", ") + op + " x" + std::to_string(count);
    return said;
  }

 private:
  template <class F>
  static void each_graph(GraphProto& g, F&& fn) {
    fn(g);
    for (auto& n : *g.mutable_node())
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) each_graph(*a.mutable_g(), fn);
        for (auto& sub : *a.mutable_graphs()) each_graph(sub, fn);
      }
  }

  std::string fresh(const std::string& base) { return names_.fresh(base); }

  [[noreturn]] void refuse(const NodeProto& n, const std::string& why) const {
    throw InputError(path_ + ": " + proto::node_label(n) + " of domain com.microsoft: " + why);
  }

  // A new default-domain node named after `from`; `output` empty: a fresh value.
  std::string add(const NodeProto& from, const std::string& op, std::vector<std::string> inputs, std::string output = "",
                  NodeProto* out_node = nullptr) {
    NodeProto n;
    n.set_op_type(op);
    const std::string base = from.name().empty() ? from.output(0) : from.name();
    n.set_name(fresh(base + "/" + op));
    for (auto& i : inputs) n.add_input(i);
    if (output.empty()) output = fresh(from.output(0) + "/" + op);
    n.add_output(output);
    if (out_node) *out_node = n;
    else out_->push_back(std::move(n));
    return output;
  }

  void push(NodeProto n) { out_->push_back(std::move(n)); }

  // The element type of a name (0 when neither declared nor implied by its producers).
  int32_t declared_type(const std::string& name) const { return known_elem_type({graph_}, name); }

  int declared_rank(const std::string& name) const {
    auto dims = known_dims({graph_}, name);
    return dims ? static_cast<int>(dims->size()) : -1;
  }

  // A rank-0 constant equal to `value` in the type of `like`, as torch's exporter writes them (the
  // fusion passes look for such constants): typed when the type is declared, else a float made
  // like `like` by CastLike (opset 15 on).
  std::string scalar(const NodeProto& from, double value, const std::string& like) {
    const int32_t type = declared_type(like);
    const std::string name = constant(from, proto::scalar_tensor(value, type), "constant");
    return type == 0 ? cast_like(from, name, like) : name;
  }

  // A Constant node holding t; returns its output.
  std::string constant(const NodeProto& from, TensorProto t, const std::string& what) {
    const std::string name = fresh(from.output(0) + "/" + what);
    t.set_name(name);
    NodeProto c;
    add(from, "Constant", {}, name, &c);
    AttributeProto* a = c.add_attribute();
    a->set_name("value");
    a->set_type(AttributeProto::TENSOR);
    *a->mutable_t() = std::move(t);
    push(std::move(c));
    return name;
  }

  // v converted to the element type of `like`: a Cast when that type is known, else a CastLike.
  std::string to_type_of(const NodeProto& from, const std::string& v, const std::string& like) {
    const int32_t type = declared_type(like);
    return type != 0 ? cast(from, v, type) : cast_like(from, v, like);
  }

  std::string cast_like(const NodeProto& from, const std::string& v, const std::string& like) {
    if (opset_ != 0 && opset_ < 15) refuse(from, "the element type of '" + like + "' is not declared (CastLike needs opset 15)");
    return add(from, "CastLike", {v, like});
  }

  // 0.5 * x * (1 + erf(x / sqrt(2))), torch 1.13's export of GELU (recognised by the fusion passes).
  // x may be a value made here: constants take the type of the node's first input, which x has.
  void gelu_erf(const NodeProto& n, const std::string& x, const std::string& y) {
    const std::string d = add(n, "Div", {x, scalar(n, 1.41421356237309504880, n.input(0))});
    const std::string e = add(n, "Erf", {d});
    const std::string plus = add(n, "Add", {e, scalar(n, 1.0, n.input(0))});
    const std::string times = add(n, "Mul", {x, plus});
    add(n, "Mul", {times, scalar(n, 0.5, n.input(0))}, y);
  }

  // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
  void gelu_tanh(const NodeProto& n, const std::string& x, const std::string& y) {
    const std::string cube = add(n, "Pow", {x, scalar(n, 3.0, n.input(0))});
    const std::string cc = add(n, "Mul", {cube, scalar(n, 0.044715, n.input(0))});
    const std::string sum = add(n, "Add", {x, cc});
    const std::string scaled = add(n, "Mul", {sum, scalar(n, 0.79788456080286535588, n.input(0))});
    const std::string t = add(n, "Tanh", {scaled});
    const std::string plus = add(n, "Add", {t, scalar(n, 1.0, n.input(0))});
    const std::string times = add(n, "Mul", {x, plus});
    add(n, "Mul", {times, scalar(n, 0.5, n.input(0))}, y);
  }

  std::string dequantize(const NodeProto& n, const std::string& x, const std::string& scale, const std::string& zero_point) {
    std::vector<std::string> in = {x, scale};
    if (!zero_point.empty()) in.push_back(zero_point);
    return add(n, "DequantizeLinear", in);
  }

  void quantize(const NodeProto& n, const std::string& y, const std::string& scale, const std::string& zero_point) {
    std::vector<std::string> in = {y, scale};
    if (!zero_point.empty()) in.push_back(zero_point);
    add(n, "QuantizeLinear", in, n.output(0));
  }

  std::string transpose(const NodeProto& n, const std::string& x, const std::vector<int64_t>& perm) {
    NodeProto t;
    const std::string y = add(n, "Transpose", {x}, "", &t);
    proto::set_attr(t, "perm", perm);
    push(std::move(t));
    return y;
  }

  // The op, with `from`'s attributes but those in `skip`.
  std::string with_attributes(const NodeProto& from, const std::string& op, std::vector<std::string> inputs,
                              const std::set<std::string>& skip, const std::string& output = "") {
    NodeProto f;
    const std::string y = add(from, op, std::move(inputs), output, &f);
    for (const auto& a : from.attribute())
      if (!skip.count(a.name())) *f.add_attribute() = a;
    push(std::move(f));
    return y;
  }

  bool quantized(const NodeProto& n) {
    const std::string& op = n.op_type();
    if (op == "QLinearAdd" || op == "QLinearMul") {
      if (n.input_size() < 7) refuse(n, "it needs at least 7 inputs");
      const std::string a = dequantize(n, n.input(0), n.input(1), input(n, 2));
      const std::string b = dequantize(n, n.input(3), n.input(4), input(n, 5));
      quantize(n, add(n, op.substr(7), {a, b}), n.input(6), input(n, 7));
      return true;
    }
    if (op == "QLinearSigmoid" || op == "QLinearLeakyRelu") {
      if (n.input_size() < 4) refuse(n, "it needs at least 4 inputs");
      const std::string x = dequantize(n, n.input(0), n.input(1), input(n, 2));
      quantize(n, with_attributes(n, op.substr(7), {x}, {}), n.input(3), input(n, 4));
      return true;
    }
    if (op == "QLinearGlobalAveragePool" || op == "QLinearAveragePool") {
      if (n.input_size() < 4) refuse(n, "it needs at least 4 inputs");
      const bool channels_last = proto::attr_int(n, "channels_last", 0) != 0;
      if (channels_last && declared_rank(n.input(0)) != 4 && declared_rank(n.input(0)) != -1)
        refuse(n, "channels_last is read for 4-D inputs only");
      std::string x = dequantize(n, n.input(0), n.input(1), input(n, 2));
      if (channels_last) x = transpose(n, x, {0, 3, 1, 2});
      std::string y = with_attributes(n, op.substr(7), {x}, {"channels_last"});
      if (channels_last) y = transpose(n, y, {0, 2, 3, 1});
      quantize(n, y, n.input(3), input(n, 4));
      return true;
    }
    if (op == "QLinearConcat") {
      if (n.input_size() < 5 || (n.input_size() - 2) % 3 != 0) refuse(n, "its inputs are not Y_scale, Y_zero_point, then triples");
      std::vector<std::string> parts;
      for (int i = 2; i + 2 < n.input_size(); i += 3) parts.push_back(dequantize(n, n.input(i), n.input(i + 1), n.input(i + 2)));
      quantize(n, with_attributes(n, "Concat", parts, {}), n.input(0), n.input(1));
      return true;
    }
    return false;
  }


  // An int64 constant (rank 1 when `vector`, else a scalar).
  std::string int64s(const NodeProto& from, const std::vector<int64_t>& values, bool vector = true) {
    TensorProto t;
    t.set_data_type(TensorProto::INT64);
    if (vector) t.add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t.add_int64_data(v);
    return constant(from, std::move(t), "ints");
  }

  std::string reshape(const NodeProto& n, const std::string& x, const std::vector<int64_t>& shape) {
    return add(n, "Reshape", {x, int64s(n, shape)});
  }

  std::string cast(const NodeProto& n, const std::string& x, int32_t to) {
    NodeProto c;
    const std::string y = add(n, "Cast", {x}, "", &c);
    proto::set_attr(c, "to", static_cast<int64_t>(to));
    push(std::move(c));
    return y;
  }

  // The int64 scalar x.shape[axis].
  std::string dim(const NodeProto& n, const std::string& x, int64_t axis) {
    NodeProto g;
    const std::string y = add(n, "Gather", {add(n, "Shape", {x}), int64s(n, {axis}, false)}, "", &g);
    proto::set_attr(g, "axis", int64_t{0});
    push(std::move(g));
    return y;
  }

  // 0, 1, ..., x.shape[axis] - 1 (int64).
  std::string positions(const NodeProto& n, const std::string& x, int64_t axis) {
    return add(n, "Range", {int64s(n, {0}, false), dim(n, x, axis), int64s(n, {1}, false)});
  }

  // ReduceSum over `axes`, keepdims 0, in the form the model's opset takes (axes an input from 13).
  std::string reduce_sum(const NodeProto& n, const std::string& x, const std::vector<int64_t>& axes) {
    NodeProto r;
    const std::string y = opset_ >= 13 ? add(n, "ReduceSum", {x, int64s(n, axes)}, "", &r) : add(n, "ReduceSum", {x}, "", &r);
    if (opset_ < 13) proto::set_attr(r, "axes", axes);
    proto::set_attr(r, "keepdims", int64_t{0});
    push(std::move(r));
    return y;
  }

  // `x` with a new axis (Unsqueeze in the form the model's opset takes: axes an input from 13).
  std::string unsqueeze(const NodeProto& n, const std::string& x, int64_t axis) {
    NodeProto u;
    const std::string y = opset_ >= 13 ? add(n, "Unsqueeze", {x, int64s(n, {axis})}, "", &u) : add(n, "Unsqueeze", {x}, "", &u);
    if (opset_ < 13) proto::set_attr(u, "axes", std::vector<int64_t>{axis});
    push(std::move(u));
    return y;
  }

  std::string concat(const NodeProto& n, const std::vector<std::string>& parts, int64_t axis) {
    NodeProto c;
    const std::string y = add(n, "Concat", parts, "", &c);
    proto::set_attr(c, "axis", axis);
    push(std::move(c));
    return y;
  }

  // x[begin:end] along axis 0 (int64 bounds as constants).
  std::string slice0(const NodeProto& n, const std::string& x, int64_t begin, int64_t end) {
    return add(n, "Slice", {x, int64s(n, {begin}), int64s(n, {end}), int64s(n, {0})});
  }

  // The additive mask of ONNX Runtime's Attention, [B, 1, 1 or S, T] in the input's type: 0 where a
  // key is attended, mask_filter_value where not. T counts the past keys too. Its mask_index is a
  // raw [B, T] or [B, S, T] mask (attended where > 0), [B] end positions (keys at or after the end
  // masked) or [2B] end then start positions (keys before the start masked too).
  std::string attention_mask(const NodeProto& n, const std::string& x, const std::string& keys, float filter) {
    const std::string m = n.input(3);
    auto mdims = known_dims({graph_}, m);
    auto xdims = known_dims({graph_}, x);
    if (!mdims) refuse(n, "the rank of its mask_index is not declared");
    const std::string zero = scalar(n, 0.0, x), masked = scalar(n, filter, x);
    auto additive = [&](const std::string& keep) { return add(n, "Where", {keep, zero, masked}); };
    if (mdims->size() == 2 || mdims->size() == 3) {
      const std::string keep = add(n, "Greater", {cast(n, m, TensorProto::INT64), int64s(n, {0}, false)});
      return mdims->size() == 2 ? reshape(n, additive(keep), {0, 1, 1, -1}) : unsqueeze(n, additive(keep), 1);  // [B, 1, S, T]
    }
    if (mdims->size() != 1)
      refuse(n, "its " + std::to_string(mdims->size()) + "-D mask_index is not read (ONNX Runtime's CPU kernel takes "
                "[B], [2B], [B, T] and [B, S, T])");
    // [B] or [2B]: told apart by the declared dims.
    const std::optional<int64_t> len = (*mdims)[0];
    const std::optional<int64_t> batch = xdims && !xdims->empty() ? (*xdims)[0] : std::nullopt;
    bool starts = false;
    if (len && batch) starts = *len == 2 * *batch;
    else if (!same_dim(m, 0, x, 0)) refuse(n, "its 1-D mask_index is not known to be [B] or [2B]");
    if (len && batch && !starts && *len != *batch) refuse(n, "its 1-D mask_index is neither [B] nor [2B]");
    const std::string index = cast(n, m, TensorProto::INT64);
    const std::string pos = reshape(n, positions(n, keys, 2), {1, -1});
    std::string end = index, start;
    if (starts) {
      end = slice0(n, index, 0, *batch);
      start = slice0(n, index, *batch, 2 * *batch);
    }
    std::string keep = add(n, "Less", {pos, reshape(n, end, {-1, 1})});
    if (starts) keep = add(n, "And", {keep, add(n, "GreaterOrEqual", {pos, reshape(n, start, {-1, 1})})});
    return reshape(n, additive(keep), {0, 1, 1, -1});
  }

  // Whether dim `a` of value x and dim `b` of value y are declared as the same symbol or number.
  bool same_dim(const std::string& x, size_t a, const std::string& y, size_t b) {
    const auto* tx = declared_tensor_type({graph_}, x);
    const auto* ty = declared_tensor_type({graph_}, y);
    if (!tx || !ty || !tx->has_shape() || !ty->has_shape()) return false;
    if (static_cast<int>(a) >= tx->shape().dim_size() || static_cast<int>(b) >= ty->shape().dim_size()) return false;
    const auto& dx = tx->shape().dim(static_cast<int>(a));
    const auto& dy = ty->shape().dim(static_cast<int>(b));
    if (dx.has_dim_value() && dy.has_dim_value()) return dx.dim_value() == dy.dim_value();
    return dx.has_dim_param() && dy.has_dim_param() && !dx.dim_param().empty() && dx.dim_param() == dy.dim_param();
  }

  // ONNX Runtime's Attention: the packed QKV projection (equal thirds, or qkv_hidden_sizes), the
  // past keys and values before this step's (input 4, [2, B, N, L, H]; output 1 the present state,
  // [2, B, N, L + S, H]), scaled dot products per head, a relative position bias (input 5, [B or 1,
  // N, S, L + S]) and the additive mask (attention_mask) added, later keys at the type's lowest
  // value when unidirectional (query i sees keys up to L + i), softmax, the heads merged back.
  void attention(const NodeProto& n) {
    const std::string x = n.input(0);
    if (n.input_size() < 2) refuse(n, "it needs input and weights");
    if (!input(n, 6).empty()) refuse(n, "past_sequence_length (a past and present sharing one buffer) is not read");
    if (proto::attr_int(n, "past_present_share_buffer", 0)) refuse(n, "past_present_share_buffer is not read");
    if (proto::attr_int(n, "do_rotary", 0)) refuse(n, "do_rotary is not read");
    const int64_t heads = proto::attr_int(n, "num_heads", 0);
    if (heads < 1) refuse(n, "num_heads is missing");
    auto wdims = known_dims({graph_}, n.input(1));
    if (!wdims || wdims->size() != 2 || !(*wdims)[1]) refuse(n, "its weights' shape [input hidden, q + k + v hidden] is not known");
    std::vector<int64_t> sizes;
    if (const auto* a = proto::find_attr(n, "qkv_hidden_sizes")) sizes.assign(a->ints().begin(), a->ints().end());
    if (sizes.empty()) {
      if (*(*wdims)[1] % 3 != 0) refuse(n, "its weights' width is not three equal parts");
      sizes.assign(3, *(*wdims)[1] / 3);
    }
    if (sizes.size() != 3 || sizes[0] != sizes[1] || sizes[0] + sizes[1] + sizes[2] != *(*wdims)[1])
      refuse(n, "qkv_hidden_sizes must be three sizes, q's equal to k's, summing to the weights' width");
    for (int64_t s : sizes)
      if (s < 1 || s % heads != 0) refuse(n, "each of q, k and v hidden sizes must be a positive multiple of num_heads");
    const int64_t head_size = sizes[0] / heads, v_head_size = sizes[2] / heads;
    const std::string past = input(n, 4), bias = input(n, 5), present = output(n, 1);
    if ((!past.empty() || !present.empty()) && head_size != v_head_size)
      refuse(n, "a past or present state needs equal k and v head sizes");
    const float filter = proto::attr_float(n, "mask_filter_value", -10000.0f);
    const float scale = proto::attr_float(n, "scale", 1.0f / std::sqrt(static_cast<float>(head_size)));
    std::string qkv = add(n, "MatMul", {x, n.input(1)});
    if (!input(n, 2).empty()) qkv = add(n, "Add", {qkv, n.input(2)});
    NodeProto split;
    const std::string q = fresh(n.output(0) + "/q"), k = fresh(n.output(0) + "/k"), v = fresh(n.output(0) + "/v");
    add(n, "Split", opset_ >= 13 ? std::vector<std::string>{qkv, int64s(n, sizes)} : std::vector<std::string>{qkv}, q, &split);
    split.add_output(k);
    split.add_output(v);
    proto::set_attr(split, "axis", int64_t{-1});
    if (opset_ < 13) proto::set_attr(split, "split", sizes);
    push(std::move(split));
    auto heads_of = [&](const std::string& t, int64_t size) {  // [B, S, N * size] -> [B, N, S, size]
      return transpose(n, reshape(n, t, {0, 0, heads, size}), {0, 2, 1, 3});
    };
    const std::string qh = heads_of(q, head_size);
    std::string kh = heads_of(k, head_size), vh = heads_of(v, v_head_size);
    if (!past.empty()) {
      auto part = [&](int64_t i) {
        NodeProto g;
        const std::string y = add(n, "Gather", {past, int64s(n, {i}, false)}, "", &g);
        proto::set_attr(g, "axis", int64_t{0});
        push(std::move(g));
        return y;
      };
      kh = concat(n, {part(0), kh}, 2);
      vh = concat(n, {part(1), vh}, 2);
    }
    if (!present.empty()) {
      NodeProto c;
      add(n, "Concat", {unsqueeze(n, kh, 0), unsqueeze(n, vh, 0)}, present, &c);
      proto::set_attr(c, "axis", int64_t{0});
      push(std::move(c));
    }
    std::string scores = add(n, "Mul", {add(n, "MatMul", {qh, transpose(n, kh, {0, 1, 3, 2})}), scalar(n, scale, x)});
    if (!bias.empty()) scores = add(n, "Add", {scores, bias});
    if (!input(n, 3).empty()) scores = add(n, "Add", {scores, attention_mask(n, x, kh, filter)});
    if (proto::attr_int(n, "unidirectional", 0)) {
      // Query i (of S) sits at L + i among the T = L + S keys.
      const std::string keys = positions(n, kh, 2);
      const std::string past_len = add(n, "Sub", {dim(n, kh, 2), dim(n, x, 1)});
      const std::string queries = add(n, "Add", {positions(n, x, 1), past_len});
      // ONNX Runtime (1.30) gives a later key the type's lowest value, not mask_filter_value: a
      // query whose earlier keys are all masked attends to those, never to a later one.
      const std::string later = add(n, "Greater", {reshape(n, keys, {1, -1}), reshape(n, queries, {-1, 1})});
      const int32_t type = declared_type(x);
      const double lowest = type == TensorProto::FLOAT16 ? -65504.0 : type == TensorProto::BFLOAT16 ? -3.3895313892515355e38
                            : type == TensorProto::DOUBLE ? -1.7976931348623157e308 : -3.4028234663852886e38;
      scores = add(n, "Where", {later, scalar(n, lowest, x), scores});
    }
    NodeProto softmax;
    const std::string probs = add(n, "Softmax", {scores}, "", &softmax);
    proto::set_attr(softmax, "axis", int64_t{-1});
    push(std::move(softmax));
    const std::string context = transpose(n, add(n, "MatMul", {probs, vh}), {0, 2, 1, 3});
    add(n, "Reshape", {context, int64s(n, {0, 0, sizes[2]})}, n.output(0));
  }

  // ONNX Runtime's EmbedLayerNormalization: word + position (+ segment) embeddings, layer-normalized;
  // the mask's row sums as mask_index; the sum as the optional third output.
  void embed_layer_norm(const NodeProto& n) {
    if (n.input_size() < 7) refuse(n, "it needs ids, segment ids, three embeddings, gamma and beta");
    const std::string ids = n.input(0), segments = n.input(1), word = n.input(2), position = n.input(3),
                      segment = n.input(4), gamma = n.input(5), beta = n.input(6), mask = input(n, 7),
                      position_ids = input(n, 8);
    auto gather = [&](const std::string& table, const std::string& index) {
      NodeProto g;
      const std::string y = add(n, "Gather", {table, index}, "", &g);
      proto::set_attr(g, "axis", int64_t{0});
      push(std::move(g));
      return y;
    };
    std::string sum = add(n, "Add", {gather(word, ids),
                                     gather(position, position_ids.empty() ? positions(n, ids, 1) : position_ids)});
    if (!segments.empty() && !segment.empty()) sum = add(n, "Add", {sum, gather(segment, segments)});
    if (!output(n, 2).empty()) add(n, "Identity", {sum}, output(n, 2));
    if (!output(n, 1).empty()) {
      if (mask.empty()) refuse(n, "its mask_index output is read and it has no mask");
      NodeProto c;
      add(n, "Cast", {reduce_sum(n, cast(n, mask, TensorProto::INT32), {1})}, output(n, 1), &c);
      proto::set_attr(c, "to", static_cast<int64_t>(TensorProto::INT32));
      push(std::move(c));
    }
    NodeProto ln;
    add(n, "LayerNormalization", {sum, gamma, beta}, n.output(0), &ln);
    proto::set_attr(ln, "axis", int64_t{-1});
    proto::set_attr(ln, "epsilon", proto::attr_float(n, "epsilon", 1e-12f));
    push(std::move(ln));
  }

  bool transformer(const NodeProto& n) {
    const std::string& op = n.op_type();
    if (op == "Attention") {
      attention(n);
      return true;
    }
    if (op == "EmbedLayerNormalization") {
      embed_layer_norm(n);
      return true;
    }
    if (op == "Gelu") {
      gelu_erf(n, n.input(0), n.output(0));
      return true;
    }
    if (op == "BiasGelu") {
      if (n.input_size() < 2) refuse(n, "it needs A and B");
      gelu_erf(n, add(n, "Add", {n.input(0), n.input(1)}), n.output(0));
      return true;
    }
    if (op == "FastGelu") {
      const std::string x = input(n, 1).empty() ? n.input(0) : add(n, "Add", {n.input(0), n.input(1)});
      gelu_tanh(n, x, n.output(0));
      return true;
    }
    if (op == "QuickGelu") {  // x * sigmoid(alpha * x)
      const std::string x = n.input(0);
      const std::string s = add(n, "Sigmoid", {add(n, "Mul", {x, scalar(n, proto::attr_float(n, "alpha", 1.702f), x)})});
      add(n, "Mul", {x, s}, n.output(0));
      return true;
    }
    if (op == "SkipLayerNormalization" || op == "SkipSimplifiedLayerNormalization") {
      const bool simplified = op == "SkipSimplifiedLayerNormalization";
      if (n.input_size() < 3) refuse(n, "it needs input, skip and gamma");
      if (!output(n, 1).empty() || !output(n, 2).empty()) refuse(n, "its mean and inverse standard deviation outputs are read");
      std::string sum = add(n, "Add", {n.input(0), n.input(1)});
      const std::string bias = simplified ? input(n, 3) : input(n, 4);
      if (!bias.empty()) sum = add(n, "Add", {sum, bias});
      if (!output(n, 3).empty()) add(n, "Identity", {sum}, output(n, 3));
      const float eps = proto::attr_float(n, "epsilon", 1e-12f);
      if (simplified) {
        const std::string square = add(n, "Mul", {sum, sum});
        NodeProto mean;
        const std::string m = add(n, "ReduceMean", {square}, "", &mean);
        proto::set_attr(mean, "axes", std::vector<int64_t>{-1});
        push(std::move(mean));
        const std::string rms = add(n, "Sqrt", {add(n, "Add", {m, scalar(n, eps, n.input(0))})});
        add(n, "Mul", {add(n, "Div", {sum, rms}), n.input(2)}, n.output(0));
      } else {
        std::vector<std::string> in = {sum, n.input(2)};
        if (!input(n, 3).empty()) in.push_back(n.input(3));
        NodeProto ln;
        add(n, "LayerNormalization", in, n.output(0), &ln);
        proto::set_attr(ln, "axis", int64_t{-1});
        proto::set_attr(ln, "epsilon", eps);
        push(std::move(ln));
      }
      return true;
    }
    if (op == "FusedMatMul") {
      if (n.input_size() < 2) refuse(n, "it needs A and B");
      if (proto::attr_int(n, "transBatchA", 0) || proto::attr_int(n, "transBatchB", 0)) refuse(n, "transBatchA / transBatchB are not read");
      auto operand = [&](const std::string& v, bool trans) {
        if (!trans) return v;
        const int rank = declared_rank(v);
        if (rank < 2) refuse(n, "the rank of '" + v + "', which it transposes, is not declared");
        std::vector<int64_t> perm(rank);
        for (int i = 0; i < rank; ++i) perm[i] = i;
        std::swap(perm[rank - 1], perm[rank - 2]);
        return transpose(n, v, perm);
      };
      const std::string a = operand(n.input(0), proto::attr_int(n, "transA", 0) != 0);
      const std::string b = operand(n.input(1), proto::attr_int(n, "transB", 0) != 0);
      const float alpha = proto::attr_float(n, "alpha", 1.0f);
      if (alpha == 1.0f) {
        add(n, "MatMul", {a, b}, n.output(0));
      } else {
        const std::string product = add(n, "MatMul", {a, b});
        add(n, "Mul", {product, scalar(n, alpha, n.input(0))}, n.output(0));
      }
      return true;
    }
    return false;
  }

  void expand(GraphProto& g) {
    std::vector<NodeProto> nodes;
    bool changed = false;
    graph_ = &g;
    for (const auto& n : g.node()) {
      if (!is_ms_domain(n.domain()) || n.input_size() == 0 || n.output_size() == 0) {
        nodes.push_back(n);
        continue;
      }
      std::vector<NodeProto> replacement;
      out_ = &replacement;
      if (quantized(n) || transformer(n)) {
        for (auto& r : replacement) nodes.push_back(std::move(r));
        ++counts_[n.op_type()];
        changed = true;
      } else {
        nodes.push_back(n);
      }
    }
    if (!changed) return;
    g.clear_node();
    for (auto& n : nodes) *g.add_node() = std::move(n);
  }

  onnx::ModelProto& p_;
  const std::string path_;
  int64_t opset_ = 0;
  proto::NameAllocator names_;
  std::map<std::string, int> counts_;
  const GraphProto* graph_ = nullptr;
  std::vector<NodeProto>* out_ = nullptr;
};

}  // namespace

std::string expand_onnx_runtime_contrib_ops(onnx::ModelProto& p, const std::string& path) {
  return ContribExpansion(p, path).run();
}

}  // namespace amp
