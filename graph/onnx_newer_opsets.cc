#include "graph/onnx_newer_opsets.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/onnx_proto_edit.h"
#include "graph/onnx_value_types.h"

namespace amp {
namespace {

using onnx::AttributeProto;
using onnx::GraphProto;
using onnx::NodeProto;
using onnx::TensorProto;

// The graphs around a node, outermost first: a name a subgraph reads may be defined further out.
using Chain = ProtoGraphChain;
using namespace proto;

template <class T>
std::vector<T> raw_values(const std::string& raw) {
  std::vector<T> out(raw.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), raw.data(), out.size() * sizeof(T));
  return out;
}

std::optional<std::vector<int64_t>> ints_of(const TensorProto& t) {
  if (t.data_location() == TensorProto::EXTERNAL) return std::nullopt;
  if (t.data_type() == TensorProto::INT64)
    return t.has_raw_data() ? raw_values<int64_t>(t.raw_data()) : std::vector<int64_t>(t.int64_data().begin(), t.int64_data().end());
  if (t.data_type() == TensorProto::INT32) {
    if (!t.has_raw_data()) return std::vector<int64_t>(t.int32_data().begin(), t.int32_data().end());
    std::vector<int32_t> v = raw_values<int32_t>(t.raw_data());
    return std::vector<int64_t>(v.begin(), v.end());
  }
  return std::nullopt;
}

std::optional<std::vector<float>> floats_of(const TensorProto& t) {
  if (t.data_location() == TensorProto::EXTERNAL || t.data_type() != TensorProto::FLOAT) return std::nullopt;
  return t.has_raw_data() ? raw_values<float>(t.raw_data()) : std::vector<float>(t.float_data().begin(), t.float_data().end());
}

// The tensor a name holds when it is a constant of the graphs around: an initializer or the output
// of a Constant node (value, value_ints, value_int, value_floats, value_float).
std::optional<TensorProto> constant_tensor(const Chain& chain, const std::string& name) {
  for (auto g = chain.rbegin(); g != chain.rend(); ++g) {
    for (const auto& t : (*g)->initializer())
      if (t.name() == name) return t;
    for (const auto& n : (*g)->node()) {
      if (n.op_type() != "Constant" || !default_domain(n.domain()) || n.output_size() != 1 || n.output(0) != name) continue;
      TensorProto t;
      if (const AttributeProto* a = find_attr(n, "value")) return a->t();
      if (const AttributeProto* a = find_attr(n, "value_ints")) {
        t.set_data_type(TensorProto::INT64);
        t.add_dims(a->ints_size());
        for (int64_t v : a->ints()) t.add_int64_data(v);
        return t;
      }
      if (const AttributeProto* a = find_attr(n, "value_int")) {
        t.set_data_type(TensorProto::INT64);
        t.add_int64_data(a->i());
        return t;
      }
      if (const AttributeProto* a = find_attr(n, "value_floats")) {
        t.set_data_type(TensorProto::FLOAT);
        t.add_dims(a->floats_size());
        for (float v : a->floats()) t.add_float_data(v);
        return t;
      }
      if (const AttributeProto* a = find_attr(n, "value_float")) {
        t.set_data_type(TensorProto::FLOAT);
        t.add_float_data(a->f());
        return t;
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<std::vector<int64_t>> constant_ints(const Chain& chain, const std::string& name) {
  auto t = constant_tensor(chain, name);
  return t ? ints_of(*t) : std::nullopt;
}

// The element types IR version 8 (ONNX 1.12) has: up to BFLOAT16. Later ones are float8 (IR 9),
// uint4 / int4 (IR 10) and float4 (IR 11).
bool ir8_type(int64_t t) { return t <= TensorProto::BFLOAT16; }

const std::set<std::string> kReductionsWithAxesInput = {"ReduceL1",  "ReduceL2",   "ReduceLogSum", "ReduceLogSumExp",
                                                        "ReduceMax", "ReduceMean", "ReduceMin",    "ReduceProd",
                                                        "ReduceSumSquare"};

// Ops that opsets 18-22 added and opset 17 has no node for, by the opset that added them. Those
// with a schema in ai.onnx_amp (graph/amp_ops.cc, ONNX's semantics under the same name) are carried
// into that domain as they are; the others are refused.
const std::map<std::string, int64_t> kNoOpset17Form = {
    {"BitwiseAnd", 18},    {"BitwiseOr", 18},      {"BitwiseXor", 18},     {"BitwiseNot", 18}, {"CenterCropPad", 18},
    {"Col2Im", 18},        {"DeformConv", 19},     {"ImageDecoder", 20},   {"RegexFullMatch", 20},
    {"StringConcat", 20},  {"StringSplit", 20}};

class Lowering {
 public:
  Lowering(onnx::ModelProto& p, std::string path, int64_t opset) : p_(p), path_(std::move(path)), opset_(opset) {
    names_.collect(p.graph());
  }

  // The carried nodes of every graph that opset-17 ops can compute (bitwise(), col2im()), written
  // so; returns how many.
  int expand_carried_ops() {
    int count = 0;
    expand_carried_graph(*p_.mutable_graph(), {}, count);
    return count;
  }

  std::vector<std::string> run() {
    lower_graph(*p_.mutable_graph(), {});
    for (auto& t : *p_.mutable_training_info()) {
      if (t.has_initialization()) lower_graph(*t.mutable_initialization(), {&p_.graph()});
      if (t.has_algorithm()) lower_graph(*t.mutable_algorithm(), {&p_.graph()});
    }
    // Functions still called as functions (a model loaded as it is): their bodies are lowered the
    // same way, as a graph of their own (what their formal inputs are is not declared there).
    for (auto& f : *p_.mutable_functions()) {
      bool newer = false;
      for (const auto& o : f.opset_import()) newer = newer || (default_domain(o.domain()) && o.version() > 17);
      if (!newer) continue;
      GraphProto body;
      body.set_name(f.name());
      for (const auto& n : f.node()) *body.add_node() = n;
      lower_graph(body, {});
      f.clear_node();
      for (const auto& n : body.node()) *f.add_node() = n;
    }
    for (auto& f : *p_.mutable_functions())
      for (auto& o : *f.mutable_opset_import())
        if (default_domain(o.domain()) && o.version() > 17) o.set_version(17);
    for (auto& o : *p_.mutable_opset_import())
      if (default_domain(o.domain())) o.set_version(17);
    if (carried_) {
      bool imported = false;
      for (const auto& o : p_.opset_import()) imported = imported || o.domain() == kAmpDomain;
      if (!imported) {
        auto* o = p_.add_opset_import();
        o->set_domain(kAmpDomain);
        o->set_version(kAmpDomainVersion);
      }
    }
    std::vector<std::string> notes;
    for (const auto& [what, count] : notes_) notes.push_back(what + (count > 1 ? " (" + std::to_string(count) + " nodes)" : ""));
    return notes;
  }

 private:
  std::string fresh(const std::string& base) { return names_.fresh(base); }

  [[noreturn]] void refuse(const NodeProto& n, const std::string& why) const {
    throw InputError(path_ + ": " + node_label(n) + " at opset " + std::to_string(opset_) + ": " + why +
                     "; this build reads models through their opset-17 form");
  }

  void note(const std::string& what) { ++notes_[what]; }

  static bool has_amp_schema(const std::string& op) {
    register_amp_op_schemas();
    return onnx::OpSchemaRegistry::Schema(op, kAmpDomainVersion, kAmpDomain) != nullptr;
  }

  // The node as it is, in ai.onnx_amp: its schema there is ONNX's newer one.
  void carry(NodeProto n, std::vector<NodeProto>& out, const std::string& what) {
    n.set_domain(kAmpDomain);
    carried_ = true;
    note(what);
    out.push_back(std::move(n));
  }

  // A new node of the default domain, named after `from`.
  NodeProto make(const NodeProto& from, const std::string& op, std::vector<std::string> inputs, const std::string& output) {
    NodeProto n;
    n.set_op_type(op);
    n.set_name(fresh((from.name().empty() ? from.output(0) : from.name()) + "/" + op));
    for (auto& i : inputs) n.add_input(i);
    n.add_output(output);
    return n;
  }

  // A Constant node holding `t`; returns the name of its output.
  std::string constant(std::vector<NodeProto>& out, const NodeProto& from, TensorProto t, const std::string& what) {
    const std::string name = fresh((from.name().empty() ? from.output(0) : from.name()) + "/" + what);
    t.set_name(name);
    NodeProto c = make(from, "Constant", {}, name);
    AttributeProto* a = c.add_attribute();
    a->set_name("value");
    a->set_type(AttributeProto::TENSOR);
    *a->mutable_t() = std::move(t);
    out.push_back(std::move(c));
    return name;
  }

  std::string int64_constant(std::vector<NodeProto>& out, const NodeProto& from, const std::vector<int64_t>& v,
                             const std::string& what) {
    TensorProto t;
    t.set_data_type(TensorProto::INT64);
    t.add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t.add_int64_data(x);
    return constant(out, from, std::move(t), what);
  }

  std::string int64_scalar(std::vector<NodeProto>& out, const NodeProto& from, int64_t v, const std::string& what) {
    TensorProto t;
    t.set_data_type(TensorProto::INT64);
    t.add_int64_data(v);
    return constant(out, from, std::move(t), what);
  }

  // A scalar of element type `type` (a float type) equal to `value` rounded once into it; for an
  // unknown type, a float scalar made like `like` by CastLike.
  std::string scalar_like(std::vector<NodeProto>& out, const NodeProto& from, double value, int32_t type,
                          const std::string& like, const std::string& what) {
    const bool known = type == TensorProto::DOUBLE || type == TensorProto::FLOAT16 || type == TensorProto::BFLOAT16 ||
                       type == TensorProto::FLOAT;
    const std::string c = constant(out, from, scalar_tensor(value, type), known ? what : what + "_float");
    if (known) return c;
    const std::string cast = fresh(c + "_like");
    out.push_back(make(from, "CastLike", {c, like}, cast));
    return cast;
  }

  void lower_graph(GraphProto& g, Chain chain) {
    chain.push_back(&g);
    // Each node is lowered from a copy: the graph's own nodes stay as they are until the end, for
    // the constants that later nodes and subgraphs look up in it.
    std::vector<NodeProto> nodes;
    for (const NodeProto& original : g.node()) {
      NodeProto n = original;
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) lower_graph(*a.mutable_g(), chain);
        for (auto& sub : *a.mutable_graphs()) lower_graph(sub, chain);
      }
      if (!default_domain(n.domain())) {
        nodes.push_back(std::move(n));
        continue;
      }
      lower_node(std::move(n), chain, nodes);
    }
    g.clear_node();
    for (auto& n : nodes) *g.add_node() = std::move(n);
  }

  void expand_carried_graph(GraphProto& g, Chain chain, int& count) {
    chain.push_back(&g);
    std::vector<NodeProto> nodes;
    for (const NodeProto& original : g.node()) {
      NodeProto n = original;
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) expand_carried_graph(*a.mutable_g(), chain, count);
        for (auto& sub : *a.mutable_graphs()) expand_carried_graph(sub, chain, count);
      }
      if (n.domain() == kAmpDomain && n.op_type().rfind("Bitwise", 0) == 0) {
        bitwise(std::move(n), chain, nodes);
        ++count;
      } else if (n.domain() == kAmpDomain && n.op_type() == "Col2Im" && col2im(n, chain, nodes)) {
        ++count;
      } else if (n.domain() == kAmpDomain && n.op_type() == "DeformConv" && deform_conv(n, chain, nodes)) {
        ++count;
      } else if (n.domain() == kAmpDomain && (n.op_type() == "ScatterElements" || n.op_type() == "ScatterND") &&
                 scatter_extreme(n, chain, nodes)) {
        ++count;
      } else {
        nodes.push_back(std::move(n));
      }
    }
    g.clear_node();
    for (auto& n : nodes) *g.add_node() = std::move(n);
  }

  // A constant of an integer type and these dims ({} a scalar) from int64 values (uint64: their bits).
  std::string int_constant(std::vector<NodeProto>& out, const NodeProto& from, int32_t type,
                           const std::vector<int64_t>& v, const std::vector<int64_t>& dims, const std::string& what) {
    TensorProto t;
    t.set_data_type(type);
    for (int64_t d : dims) t.add_dims(d);
    for (int64_t x : v) {
      if (type == TensorProto::UINT64) t.add_uint64_data(static_cast<uint64_t>(x));
      else t.add_int64_data(x);
    }
    return constant(out, from, std::move(t), what);
  }

  // BitwiseAnd / Or / Xor / Not (opset 18) in opset-17 ops, which have no bitwise operator: each
  // operand as the 64-bit two's complement of its value (int8..int64 sign-extended, uint8..uint32
  // zero-extended, uint64 as it is), split into its top bit (a bool) and its 63 low bits (0 / 1 in
  // an int64 tensor along two new last axes, 3 groups of 21, by BitShifts on uint64); the op on
  // those (Mul, Max, sum mod 2, 1 - bit; And, Or, Xor, Not on the top bits); the low bits summed
  // back with their powers of two group by group, the top bit added as -2^63 (2^63 for uint64, by
  // BitShift), and the 64-bit result read as the type: exact for the signed types, mod 2^W for
  // the narrower unsigned ones (~x of a zero-extended x sets the bits above W). No step overflows,
  // depends on an implementation-defined conversion or needs more than double's 53 bits.
  void bitwise(NodeProto n, const Chain& chain, std::vector<NodeProto>& out) {
    const std::string op = n.op_type().substr(std::string("Bitwise").size());
    const bool unary = op == "Not";
    if (op != "And" && op != "Or" && op != "Xor" && op != "Not") refuse(n, "not a bitwise op");
    if (n.input_size() < (unary ? 1 : 2) || n.output_size() < 1) refuse(n, "missing inputs or output");
    const int32_t type = known_elem_type(chain, n.input(0));
    int width = 0;
    bool is_signed = true;
    switch (type) {
      case TensorProto::INT8: width = 8; break;
      case TensorProto::INT16: width = 16; break;
      case TensorProto::INT32: width = 32; break;
      case TensorProto::INT64: width = 64; break;
      case TensorProto::UINT8: width = 8, is_signed = false; break;
      case TensorProto::UINT16: width = 16, is_signed = false; break;
      case TensorProto::UINT32: width = 32, is_signed = false; break;
      case TensorProto::UINT64: width = 64, is_signed = false; break;
      default: refuse(n, "the element type of its input is not declared as an integer type");
    }
    const int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
    // The 63 low bits as 3 groups of 21 along two new last axes: bit 21 g + j at [g, j].
    std::vector<int64_t> ups, powers;
    for (int64_t k = 0; k < 63; ++k) ups.push_back(63 - k), powers.push_back(int64_t{1} << (k % 21));
    const std::string last_axis = int64_constant(out, n, {-1}, "last_axis");
    const std::string bits_up = int_constant(out, n, TensorProto::UINT64, ups, {3, 21}, "bits_up");
    const std::string to_bottom = int_constant(out, n, TensorProto::UINT64, {63}, {}, "to_bottom");
    auto shift = [&](const std::string& x, const std::string& by, const char* direction, const std::string& what) {
      NodeProto& s = emit(out, n, "BitShift", {x, by}, what);
      set_attr(s, "direction", std::string(direction));
      return s.output(0);
    };
    // (low bits as int64 0 / 1 along a new last axis, top bit as bool)
    auto split = [&](const std::string& x, const std::string& tag) {
      std::string low, top;
      if (type == TensorProto::UINT64) {
        const std::string one = int_constant(out, n, TensorProto::UINT64, {1}, {}, tag + "_one");
        low = shift(shift(x, one, "LEFT", tag + "_up"), one, "RIGHT", tag + "_low");
        const std::string at63 = int_constant(out, n, TensorProto::UINT64, {63}, {}, tag + "_at63");
        top = cast(out, n, shift(x, at63, "RIGHT", tag + "_top_bit"), TensorProto::BOOL, tag + "_top");
      } else {
        const std::string x64 = type == TensorProto::INT64 ? x : cast(out, n, x, TensorProto::INT64, tag + "_int64");
        top = value(out, n, "Less", {x64, int64_scalar(out, n, 0, tag + "_zero")}, tag + "_top");
        // x + 2^63 where x < 0, as (x + (2^63 - 1)) + 1 on a value that is negative or -1.
        const std::string negative =
            value(out, n, "Where", {top, x64, int64_scalar(out, n, -1, tag + "_minus_one")},
                  tag + "_negative");
        const std::string lifted = value(
            out, n, "Add",
            {value(out, n, "Add", {negative, int64_scalar(out, n, kMax, tag + "_max")}, tag + "_lift"),
             int64_scalar(out, n, 1, tag + "_one")},
            tag + "_lifted");
        low = cast(out, n, value(out, n, "Where", {top, lifted, x64}, tag + "_low_int64"), TensorProto::UINT64, tag + "_low");
      }
      // Bit k moved to the top (left by 63 - k), then to the bottom (right by 63): shifts only, on
      // uint64 (a Mod of values near 2^63 is computed in double by ONNX Runtime).
      const std::string spread =
          value(out, n, "Unsqueeze", {low, int64_constant(out, n, {-2, -1}, tag + "_new_axes")}, tag + "_spread");
      const std::string raised = shift(spread, bits_up, "LEFT", tag + "_raised");
      const std::string bits = cast(out, n, shift(raised, to_bottom, "RIGHT", tag + "_bit"), TensorProto::INT64, tag + "_bits");
      return std::make_pair(bits, top);
    };
    const auto [a_bits, a_top] = split(n.input(0), "a");
    std::string bits, top;
    if (unary) {
      bits = value(out, n, "Sub", {int64_scalar(out, n, 1, "one"), a_bits}, "not_bits");
      top = value(out, n, "Not", {a_top}, "not_top");
    } else {
      const auto [b_bits, b_top] = split(n.input(1), "b");
      if (op == "And") bits = value(out, n, "Mul", {a_bits, b_bits}, "and_bits");
      if (op == "Or") bits = value(out, n, "Max", {a_bits, b_bits}, "or_bits");
      if (op == "Xor")
        bits = value(out, n, "Mod",
                     {value(out, n, "Add", {a_bits, b_bits}, "bit_sums"), int64_scalar(out, n, 2, "two")},
                     "xor_bits");
      top = value(out, n, op, {a_top, b_top}, "top");
    }
    // Each group summed with its powers of two (below 2^21: exact even where ONNX Runtime's
    // int64 ReduceSum accumulates in double), then the groups joined by exact int64 Mul and Add.
    const std::string group_powers = int_constant(out, n, TensorProto::INT64, powers, {3, 21}, "group_powers");
    NodeProto& sum = emit(out, n, "ReduceSum", {value(out, n, "Mul", {bits, group_powers}, "weighted_bits"), last_axis},
                          "group_values");
    set_attr(sum, "keepdims", int64_t{0});
    const std::string groups = sum.output(0);
    auto group = [&](int64_t g) {
      NodeProto& gather =
          emit(out, n, "Gather", {groups, int64_scalar(out, n, g, "group_index")}, "group");
      set_attr(gather, "axis", int64_t{-1});
      const std::string v = gather.output(0);
      return g == 0 ? v
                    : value(out, n, "Mul", {v, int64_scalar(out, n, int64_t{1} << (21 * g), "group_base")},
                            "group_value");
    };
    const std::string low = value(out, n, "Add", {value(out, n, "Add", {group(0), group(1)}, "low_42"), group(2)}, "low_value");
    const std::string y = n.output(0);
    note("Bitwise" + op + ": opset-17 arithmetic on its bits");
    if (type == TensorProto::UINT64) {
      // 2^63 where the top bit is set (ONNX Runtime has no uint64 Where).
      const std::string high = shift(cast(out, n, top, TensorProto::UINT64, "top_uint64"),
                                     int_constant(out, n, TensorProto::UINT64, {63}, {}, "top_shift"), "LEFT", "high");
      return finish(out, n, "Add", {cast(out, n, low, TensorProto::UINT64, "low_uint64"), high}, y);
    }
    const std::string full =
        value(out, n, "Where",
              {top, value(out, n, "Add", {low, int64_scalar(out, n, kMin, "top_value")}, "with_top"), low},
              "value64");
    auto as_type = [&](const std::string& v) {
      finish(out, n, "Cast", {v}, y);
      set_attr(out.back(), "to", int64_t{type});
    };
    if (is_signed) return type == TensorProto::INT64 ? finish(out, n, "Identity", {full}, y) : as_type(full);
    const std::string wrapped =
        value(out, n, "Mod", {full, int64_scalar(out, n, int64_t{1} << width, "modulus")}, "wrapped");
    as_type(wrapped);
  }

  // Col2Im (opset 18) in opset-17 ops, when image_shape and block_shape are constants: every
  // column entry (channel c, block offset k, position l) is added into the zero-padded image at
  // the flat index l's window start + k's dilated offset (computed here, one [K * L] table shared
  // by every image and channel) by ScatterElements with reduction add (opset 16), reshaped to
  // [N, C, padded dims] and the pads sliced off. False (the node left as it is) when the shapes
  // are computed at run time or do not fit.
  bool col2im(const NodeProto& n, const Chain& chain, std::vector<NodeProto>& out) {
    if (n.input_size() < 3 || n.output_size() < 1) return false;
    const auto image = constant_ints(chain, n.input(1)), block = constant_ints(chain, n.input(2));
    if (!image || !block || image->empty() || image->size() != block->size()) return false;
    const size_t r = image->size();
    auto ints = [&](const char* name, int64_t fallback, size_t count) {
      std::vector<int64_t> v(count, fallback);
      if (const AttributeProto* a = find_attr(n, name)) v.assign(a->ints().begin(), a->ints().end());
      return v;
    };
    const std::vector<int64_t> dil = ints("dilations", 1, r), pads = ints("pads", 0, 2 * r), strides = ints("strides", 1, r);
    if (dil.size() != r || pads.size() != 2 * r || strides.size() != r) return false;
    std::vector<int64_t> padded(r), grid(r);
    int64_t blocks = 1, positions = 1, padded_total = 1;
    for (size_t d = 0; d < r; ++d) {
      padded[d] = (*image)[d] + pads[d] + pads[d + r];
      const int64_t span = dil[d] * ((*block)[d] - 1) + 1;
      if ((*block)[d] < 1 || dil[d] < 1 || strides[d] < 1 || padded[d] < span) return false;
      grid[d] = (padded[d] - span) / strides[d] + 1;
      blocks *= (*block)[d], positions *= grid[d], padded_total *= padded[d];
    }
    // index[k * L + l]: the padded image's flat index of block offset k at window l.
    std::vector<int64_t> index(static_cast<size_t>(blocks * positions));
    for (int64_t k = 0; k < blocks; ++k)
      for (int64_t l = 0; l < positions; ++l) {
        int64_t kr = k, lr = l, flat = 0;
        std::vector<int64_t> at(r);
        for (size_t d = r; d-- > 0;) {
          at[d] = (lr % grid[d]) * strides[d] + (kr % (*block)[d]) * dil[d];
          lr /= grid[d], kr /= (*block)[d];
        }
        for (size_t d = 0; d < r; ++d) flat = flat * padded[d] + at[d];
        index[static_cast<size_t>(k * positions + l)] = flat;
      }
    const std::string x = n.input(0), y = n.output(0);
    const std::string columns =
        value(out, n, "Reshape", {x, int64_constant(out, n, {0, -1, blocks * positions}, "columns_shape")}, "columns");
    const std::string table = int_constant(out, n, TensorProto::INT64, index, {1, 1, blocks * positions}, "image_index");
    const std::string columns_shape = value(out, n, "Shape", {columns}, "columns_dims");
    const std::string indices = value(out, n, "Expand", {table, columns_shape}, "indices");
    NodeProto& nc = emit(out, n, "Shape", {columns}, "batch_channels");
    set_attr(nc, "end", int64_t{2});
    const std::string batch_channels = nc.output(0), canvas_size = int64_constant(out, n, {padded_total}, "canvas_size");
    NodeProto& concat = emit(out, n, "Concat", {batch_channels, canvas_size}, "canvas_dims");
    set_attr(concat, "axis", int64_t{0});
    const std::string canvas_shape = concat.output(0);
    const std::string zero = value(out, n, "CastLike", {constant(out, n, scalar_tensor(0.0, TensorProto::FLOAT), "zero"), x}, "zero_like");
    const std::string canvas = value(out, n, "Expand", {zero, canvas_shape}, "canvas");
    NodeProto& scatter = emit(out, n, "ScatterElements", {canvas, indices, columns}, "summed");
    set_attr(scatter, "axis", int64_t{2});
    set_attr(scatter, "reduction", std::string("add"));
    const std::string summed = scatter.output(0);
    std::vector<int64_t> image_dims{0, 0};
    image_dims.insert(image_dims.end(), padded.begin(), padded.end());
    const std::string padded_image = value(out, n, "Reshape", {summed, int64_constant(out, n, image_dims, "padded_shape")}, "padded");
    std::vector<int64_t> starts(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(r)), ends(r), axes(r);
    for (size_t d = 0; d < r; ++d) ends[d] = starts[d] + (*image)[d], axes[d] = static_cast<int64_t>(d) + 2;
    note("Col2Im: ScatterElements with reduction add into the padded image");
    finish(out, n, "Slice",
           {padded_image, int64_constant(out, n, starts, "starts"), int64_constant(out, n, ends, "ends"),
            int64_constant(out, n, axes, "axes")},
           y);
    return true;
  }

  // ScatterElements and ScatterND with reduction max or min (opset 18) in opset-17 ops, when the
  // shapes are declared: both as "row m of a [M, R] table takes the extreme of itself and of every
  // update row u whose index is m". ScatterElements moves its axis first (M = data's extent there,
  // R the rest, which the updates must cover whole), ScatterND flattens the K dims its index
  // addresses (M their product, the index linear, R the rest). A [U, M, R] comparison of the update
  // rows' indices with 0..M-1 (negative indices wrapped) picks each row's candidates (the others the
  // type's lowest or highest value), ReduceMax / ReduceMin over U gives their extreme, and Where
  // (any candidate) Max / Min with the data row gives the result. False (the node left as it is)
  // when a shape is not declared, the updates do not cover the other axes, or the comparison would
  // hold more than 2^24 elements.
  bool scatter_extreme(const NodeProto& n, const Chain& chain, std::vector<NodeProto>& out) {
    const std::string reduction = attr_string(n, "reduction", "none");
    if ((reduction != "max" && reduction != "min") || n.input_size() < 3 || n.output_size() < 1) return false;
    const bool is_max = reduction == "max", elements = n.op_type() == "ScatterElements";
    const std::string data = n.input(0), indices = n.input(1), updates = n.input(2), y = n.output(0);
    const auto dd = known_dims(chain, data), id = known_dims(chain, indices);
    const int32_t type = known_elem_type(chain, data);
    if (!dd || !id || type == 0) return false;
    std::vector<int64_t> dims, idims;
    for (const auto& d : *dd) {
      if (!d) return false;
      dims.push_back(*d);
    }
    for (const auto& d : *id) {
      if (!d) return false;
      idims.push_back(*d);
    }
    const int64_t rank = static_cast<int64_t>(dims.size());
    if (rank == 0) return false;
    auto product = [](const std::vector<int64_t>& v, size_t from, size_t to) {
      int64_t p = 1;
      for (size_t i = from; i < to; ++i) p *= v[i];
      return p;
    };
    // The type's value no update can beat: -inf / +inf for floats, the integer extremes otherwise.
    TensorProto bound;
    bound.set_data_type(type);
    const bool floating = type == TensorProto::FLOAT || type == TensorProto::DOUBLE || type == TensorProto::FLOAT16 ||
                          type == TensorProto::BFLOAT16;
    if (floating) {
      bound = scalar_tensor(is_max ? -INFINITY : INFINITY, type);
    } else if (type == TensorProto::INT32 || type == TensorProto::INT8 || type == TensorProto::INT16 ||
               type == TensorProto::UINT8 || type == TensorProto::UINT16) {
      int64_t lo = 0, hi = 0;
      switch (type) {
        case TensorProto::INT32: lo = INT32_MIN, hi = INT32_MAX; break;
        case TensorProto::INT8: lo = INT8_MIN, hi = INT8_MAX; break;
        case TensorProto::INT16: lo = INT16_MIN, hi = INT16_MAX; break;
        case TensorProto::UINT8: hi = UINT8_MAX; break;
        default: hi = UINT16_MAX; break;
      }
      bound.add_int32_data(static_cast<int32_t>(is_max ? lo : hi));
    } else if (type == TensorProto::INT64) {
      bound.add_int64_data(is_max ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max());
    } else {
      return false;  // bool, uint32, uint64: left to the refusal
    }
    int64_t m = 0, r = 0, u = 0;
    std::string table, rows, index;  // [M, R] data, [U, R] updates, [U, 1, R] or [U, 1, 1] row index
    std::vector<int64_t> perm, moved;
    if (elements) {
      if (idims.size() != dims.size()) return false;
      int64_t axis = attr_int(n, "axis", 0);
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank) return false;
      for (int64_t k = 0; k < rank; ++k)
        if (k != axis && idims[static_cast<size_t>(k)] != dims[static_cast<size_t>(k)]) return false;
      m = dims[static_cast<size_t>(axis)], u = idims[static_cast<size_t>(axis)], r = product(dims, 0, dims.size()) / m;
      perm.push_back(axis);
      for (int64_t k = 0; k < rank; ++k)
        if (k != axis) perm.push_back(k);
      for (int64_t k : perm) moved.push_back(dims[static_cast<size_t>(k)]);
      auto first = [&](const std::string& v, int64_t lead, const std::string& what) {
        const std::string t = transpose(out, n, v, perm, what + "_axis_first");
        return value(out, n, "Reshape", {t, int64_constant(out, n, {lead, r}, what + "_rows_shape")}, what + "_rows");
      };
      table = first(data, m, "data");
      rows = first(updates, u, "updates");
      const std::string idx = first(indices, u, "indices");
      index = value(out, n, "Unsqueeze", {idx, int64_constant(out, n, {1}, "index_axis")}, "row_index");
    } else {
      if (idims.empty()) return false;
      const int64_t k = idims.back();
      if (k < 1 || k > rank) return false;
      m = product(dims, 0, static_cast<size_t>(k)), r = product(dims, static_cast<size_t>(k), dims.size());
      u = product(idims, 0, idims.size() - 1);
      table = value(out, n, "Reshape", {data, int64_constant(out, n, {m, r}, "data_rows_shape")}, "data_rows");
      rows = value(out, n, "Reshape", {updates, int64_constant(out, n, {u, r}, "updates_rows_shape")}, "updates_rows");
      // The linear index of each index tuple (each entry wrapped when negative).
      std::vector<int64_t> strides(static_cast<size_t>(k)), extents(dims.begin(), dims.begin() + k);
      for (int64_t j = k - 1, s = 1; j >= 0; --j) strides[static_cast<size_t>(j)] = s, s *= dims[static_cast<size_t>(j)];
      const std::string tuples = value(out, n, "Reshape", {indices, int64_constant(out, n, {u, k}, "tuples_shape")}, "tuples");
      const std::string extent = int64_constant(out, n, extents, "extents");
      const std::string wrapped = value(
          out, n, "Where",
          {value(out, n, "Less", {tuples, int64_scalar(out, n, 0, "zero_index")}, "negative_index"),
           value(out, n, "Add", {tuples, extent}, "tuples_wrapped"), tuples},
          "tuples_nonnegative");
      NodeProto& linear = emit(out, n, "ReduceSum",
                               {value(out, n, "Mul", {wrapped, int64_constant(out, n, strides, "strides")}, "offsets"),
                                int64_constant(out, n, {1}, "tuple_axis")},
                               "linear_index");
      set_attr(linear, "keepdims", int64_t{1});
      const std::string li = linear.output(0);  // [U, 1]
      index = value(out, n, "Unsqueeze", {li, int64_constant(out, n, {2}, "index_axis")}, "row_index");
    }
    if (m < 1 || r < 1 || u < 0 || u * m * r > (int64_t{1} << 24)) return false;
    std::string idx = index;
    if (elements) {  // ScatterElements' negative indices wrap here (ScatterND's were wrapped per entry)
      idx = value(out, n, "Where",
                  {value(out, n, "Less", {index, int64_scalar(out, n, 0, "zero_index")}, "negative_index"),
                   value(out, n, "Add", {index, int64_scalar(out, n, m, "extent")}, "index_wrapped"), index},
                  "index_nonnegative");
    }
    std::vector<int64_t> row_numbers(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) row_numbers[static_cast<size_t>(i)] = i;
    const std::string targets = value(
        out, n, "Reshape",
        {int64_constant(out, n, row_numbers, "row_numbers"), int64_constant(out, n, {1, m, 1}, "row_numbers_shape")},
        "targets");
    const std::string hit = value(out, n, "Equal", {idx, targets}, "hits");  // [U, M, R] or [U, M, 1]
    const std::string candidates = value(
        out, n, "Where",
        {hit, value(out, n, "Unsqueeze", {rows, int64_constant(out, n, {1}, "candidate_axis")}, "update_rows"),
         constant(out, n, bound, "bound")},
        "candidates");
    NodeProto& extreme = emit(out, n, is_max ? "ReduceMax" : "ReduceMin", {candidates}, "extreme");
    set_attr(extreme, "axes", std::vector<int64_t>{0});
    set_attr(extreme, "keepdims", int64_t{0});
    const std::string best = extreme.output(0);  // [M, R]
    NodeProto& any = emit(out, n, "ReduceMax", {cast(out, n, hit, TensorProto::INT32, "hits_int")}, "hit_count");
    set_attr(any, "axes", std::vector<int64_t>{0});
    set_attr(any, "keepdims", int64_t{0});
    const std::string touched = cast(out, n, any.output(0), TensorProto::BOOL, "touched");  // [M, R] or [M, 1]
    const std::string combined = value(out, n, is_max ? "Max" : "Min", {table, best}, "combined");
    const std::string result = value(out, n, "Where", {touched, combined, table}, "result_rows");
    note(n.op_type() + ": reduction '" + reduction + "' as a comparison of the indices with every row");
    if (!elements) {
      finish(out, n, "Reshape", {result, int64_constant(out, n, dims, "data_shape")}, y);
      return true;
    }
    const std::string back = value(out, n, "Reshape", {result, int64_constant(out, n, moved, "moved_shape")}, "moved");
    std::vector<int64_t> inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
    NodeProto last = make(n, "Transpose", {back}, y);
    set_attr(last, "perm", inverse);
    last.set_name(n.name().empty() ? fresh(y + "/" + n.op_type()) : n.name());
    out.push_back(std::move(last));
    return true;
  }

  // DeformConv (opset 19, 2-D) in opset-17 ops, when X, W and offset have declared dims: each
  // tap's sampling position (the window's tap plus its offset, per offset group) read bilinearly
  // from X as four GatherElements of the flattened image, a corner outside the image counting 0
  // (torchvision's deform_conv2d, which ONNX follows), times the mask; the sampled columns
  // [N, group, C / group * K, L] then a MatMul with W as [group, M / group, C / group * K], and B.
  // False (the node left as it is) when a dim is not declared or the shapes disagree.
  bool deform_conv(const NodeProto& n, const Chain& chain, std::vector<NodeProto>& out) {
    if (n.input_size() < 3 || n.output_size() < 1) return false;
    auto dims_of = [&](const std::string& v) -> std::optional<std::vector<int64_t>> {
      const auto d = known_dims(chain, v);
      if (!d || d->size() != 4) return std::nullopt;
      std::vector<int64_t> out_dims;
      for (const auto& x : *d) {
        if (!x) return std::nullopt;
        out_dims.push_back(*x);
      }
      return out_dims;
    };
    const std::string x = n.input(0), w = n.input(1), offset = n.input(2);
    const std::string bias = n.input_size() > 3 ? n.input(3) : "", mask = n.input_size() > 4 ? n.input(4) : "";
    const auto xd = dims_of(x), wd = dims_of(w), od = dims_of(offset);
    if (!xd || !wd || !od) return false;
    const int64_t batch = (*xd)[0], c = (*xd)[1], h = (*xd)[2], width = (*xd)[3];
    const int64_t m = (*wd)[0], kh = (*wd)[2], kw = (*wd)[3], k = kh * kw, oh = (*od)[2], ow = (*od)[3], l = oh * ow;
    const int64_t groups = attr_int(n, "group", 1), offset_groups = attr_int(n, "offset_group", 1);
    auto ints = [&](const char* name, int64_t fallback, size_t count) {
      std::vector<int64_t> v(count, fallback);
      if (const AttributeProto* a = find_attr(n, name)) v.assign(a->ints().begin(), a->ints().end());
      return v;
    };
    const std::vector<int64_t> dil = ints("dilations", 1, 2), pads = ints("pads", 0, 4), strides = ints("strides", 1, 2);
    if (groups < 1 || offset_groups < 1 || c % groups || m % groups || c % offset_groups || (*wd)[1] * groups != c ||
        (*od)[0] != batch || (*od)[1] != offset_groups * 2 * k || dil.size() != 2 || pads.size() != 4 || strides.size() != 2)
      return false;
    // The window's taps: y = oy * stride - pad + i * dilation (x alike), as [1, 1, K, L].
    auto base = [&](bool along_y, const std::string& what) {
      TensorProto t;
      t.set_data_type(TensorProto::FLOAT);
      for (int64_t d : {int64_t{1}, int64_t{1}, k, l}) t.add_dims(d);
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j)
          for (int64_t py = 0; py < oh; ++py)
            for (int64_t px = 0; px < ow; ++px)
              t.add_float_data(static_cast<float>(along_y ? py * strides[0] - pads[0] + i * dil[0]
                                                          : px * strides[1] - pads[1] + j * dil[1]));
      return value(out, n, "CastLike", {constant(out, n, std::move(t), what), x}, what + "_like");
    };
    const std::string offsets =
        value(out, n, "Reshape", {offset, int64_constant(out, n, {batch, offset_groups, k, 2, l}, "offset_shape")}, "offsets");
    auto component = [&](int64_t which, const std::string& what) {
      NodeProto& g = emit(out, n, "Gather", {offsets, int64_scalar(out, n, which, what + "_index")}, what);
      set_attr(g, "axis", int64_t{3});
      return g.output(0);
    };
    const std::string py = value(out, n, "Add", {base(true, "tap_y"), component(0, "offset_y")}, "sample_y");
    const std::string px = value(out, n, "Add", {base(false, "tap_x"), component(1, "offset_x")}, "sample_x");
    const std::string y0 = value(out, n, "Floor", {py}, "y_low"), x0 = value(out, n, "Floor", {px}, "x_low");
    const std::string ly = value(out, n, "Sub", {py, y0}, "y_frac"), lx = value(out, n, "Sub", {px, x0}, "x_frac");
    auto number = [&](double v, const std::string& what) {
      return value(out, n, "CastLike", {constant(out, n, scalar_tensor(v, TensorProto::FLOAT), what), x}, what + "_like");
    };
    const std::string one = number(1.0, "one");
    const std::string hy = value(out, n, "Sub", {one, ly}, "y_rest"), hx = value(out, n, "Sub", {one, lx}, "x_rest");
    const std::string image =
        value(out, n, "Reshape", {x, int64_constant(out, n, {batch, offset_groups, c / offset_groups, h * width}, "image_shape")},
              "image");
    const std::string gather_shape = int64_constant(out, n, {batch, offset_groups, c / offset_groups, k * l}, "gather_shape");
    std::string sampled;
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) {
        const std::string tag = "corner" + std::to_string(a) + std::to_string(b);
        const std::string yy = a ? value(out, n, "Add", {y0, one}, tag + "_y") : y0;
        const std::string xx = b ? value(out, n, "Add", {x0, one}, tag + "_x") : x0;
        auto within = [&](const std::string& v, int64_t extent, const std::string& what) {
          return value(out, n, "And",
                       {value(out, n, "GreaterOrEqual", {v, number(0.0, what + "_zero")}, what + "_from"),
                        value(out, n, "LessOrEqual", {v, number(static_cast<double>(extent - 1), what + "_last")}, what + "_to")},
                       what + "_inside");
        };
        const std::string inside = value(out, n, "And", {within(yy, h, tag + "_y"), within(xx, width, tag + "_x")}, tag + "_inside");
        const std::string flat = value(out, n, "Add", {value(out, n, "Mul", {yy, number(static_cast<double>(width), tag + "_w")}, tag + "_row"), xx},
                                       tag + "_flat");
        const std::string index = cast(out, n, value(out, n, "Where", {inside, flat, number(0.0, tag + "_none")}, tag + "_at"),
                                       TensorProto::INT64, tag + "_index");
        const std::string spread = value(
            out, n, "Expand",
            {value(out, n, "Reshape", {index, int64_constant(out, n, {batch, offset_groups, 1, k * l}, tag + "_index_shape")},
                   tag + "_index_row"),
             gather_shape},
            tag + "_indices");
        NodeProto& ge = emit(out, n, "GatherElements", {image, spread}, tag + "_values");
        set_attr(ge, "axis", int64_t{3});
        const std::string values = ge.output(0);
        const std::string weight = value(
            out, n, "Mul",
            {value(out, n, "Mul", {a ? ly : hy, b ? lx : hx}, tag + "_bilinear"), value(out, n, "CastLike", {inside, x}, tag + "_inside_like")},
            tag + "_weight");
        std::string wrow = value(
            out, n, "Reshape", {weight, int64_constant(out, n, {batch, offset_groups, 1, k * l}, tag + "_weight_shape")},
            tag + "_weight_row");
        const std::string term = value(out, n, "Mul", {values, wrow}, tag + "_term");
        sampled = sampled.empty() ? term : value(out, n, "Add", {sampled, term}, tag + "_sum");
      }
    if (!mask.empty())
      sampled = value(out, n, "Mul",
                      {sampled, value(out, n, "Reshape", {mask, int64_constant(out, n, {batch, offset_groups, 1, k * l}, "mask_shape")},
                                      "mask_row")},
                      "masked");
    const std::string columns =
        value(out, n, "Reshape", {sampled, int64_constant(out, n, {batch, groups, c / groups * k, l}, "columns_shape")}, "columns");
    const std::string weights =
        value(out, n, "Reshape", {w, int64_constant(out, n, {groups, m / groups, c / groups * k}, "weights_shape")}, "weights");
    std::string y = value(out, n, "Reshape",
                          {value(out, n, "MatMul", {weights, columns}, "products"),
                           int64_constant(out, n, {batch, m, oh, ow}, "output_shape")},
                          "convolved");
    note("DeformConv: its bilinear sampling as GatherElements, then a MatMul");
    if (bias.empty()) {
      finish(out, n, "Identity", {y}, n.output(0));
      return true;
    }
    finish(out, n, "Add", {y, value(out, n, "Reshape", {bias, int64_constant(out, n, {1, m, 1, 1}, "bias_shape")}, "bias_column")},
           n.output(0));
    return true;
  }

  void lower_node(NodeProto n, const Chain& chain, std::vector<NodeProto>& out) {
    const std::string op = n.op_type();
    // A node without inputs or outputs (malformed, or a Constant) is left for the checker to judge.
    if (n.input_size() == 0 || n.output_size() == 0) return out.push_back(std::move(n));
    if (op == "GroupNormalization" && n.input_size() < 3) refuse(n, "it needs input, scale and bias");
    if (auto it = kNoOpset17Form.find(op); it != kNoOpset17Form.end() && opset_ >= it->second) {
      if (!has_amp_schema(op)) refuse(n, op + " came with opset " + std::to_string(it->second) + " and has no opset-17 form");
      return carry(std::move(n), out, op + ": carried as ai.onnx_amp " + op + " (opset 17 has no " + op + ")");
    }
    if (kReductionsWithAxesInput.count(op)) return reduction(std::move(n), chain, out);
    if (op == "Split") return split(std::move(n), chain, out);
    if (op == "Pad") return pad(std::move(n), chain, out);
    if (op == "Resize") return resize(std::move(n), chain, out);
    if (op == "Gelu" && opset_ >= 20) return gelu(std::move(n), chain, out);
    if (op == "Mish") return mish(std::move(n), chain, out);
    if (op == "AffineGrid" && opset_ >= 20) return affine_grid(std::move(n), chain, out);
    if (op == "GroupNormalization") return group_norm(std::move(n), chain, out);
    if (op == "Attention" && opset_ >= 23) return attention(std::move(n), chain, out);
    if (op == "RMSNormalization" && opset_ >= 23) return rms_norm(std::move(n), chain, out);
    if (op == "RotaryEmbedding" && opset_ >= 23) return rotary_embedding(std::move(n), chain, out);
    if (op == "Swish" && opset_ >= 24) return swish(std::move(n), chain, out);
    if (op == "TensorScatter" && opset_ >= 24) return tensor_scatter(std::move(n), chain, out);
    if ((op == "ScatterElements" || op == "ScatterND")) {
      const std::string r = attr_string(n, "reduction", "none");
      if (r == "max" || r == "min") {
        if (!has_amp_schema(op)) refuse(n, "reduction '" + r + "' came with opset 18");
        return carry(std::move(n), out, op + ": reduction '" + r + "' carried as ai.onnx_amp " + op);
      }
    } else if (op == "LpPool") {
      if (attr_int(n, "ceil_mode", 0) != 0) refuse(n, "ceil_mode came with opset 18");
      if (remove_attr(n, "ceil_mode")) note("LpPool: ceil_mode 0 dropped");
    } else if (op == "AveragePool" && opset_ >= 19) {
      if (const AttributeProto* d = find_attr(n, "dilations")) {
        for (int64_t v : d->ints())
          if (v != 1) refuse(n, "dilations came with opset 19");
        remove_attr(n, "dilations");
        note("AveragePool: dilations of 1 dropped");
      }
    } else if ((op == "Cast" || op == "CastLike") && opset_ >= 19) {
      if (remove_attr(n, "saturate")) note(op + ": saturate (float8 only) dropped");
      if (remove_attr(n, "round_mode")) note(op + ": round_mode (float8e8m0 only) dropped");
    } else if (op == "QuantizeLinear" || op == "DequantizeLinear") {
      if (opset_ >= 19 && remove_attr(n, "saturate")) note(op + ": saturate (float8 only) dropped");
      if (attr_int(n, "precision", 0) != 0) refuse(n, "the precision attribute came with opset 23");
      if (remove_attr(n, "precision")) note(op + ": precision 0 dropped");
      if (attr_int(n, "block_size", 0) != 0) refuse(n, "blocked quantization (block_size) came with opset 21");
      if (remove_attr(n, "block_size")) note(op + ": block_size 0 dropped");
      if (const AttributeProto* a = find_attr(n, "output_dtype")) {
        const int64_t t = a->i();
        const bool has_zero_point = n.input_size() >= 3 && !n.input(2).empty();
        if (t != 0 && t != TensorProto::UINT8 && !has_zero_point)
          refuse(n, "output_dtype " + std::to_string(t) + " without a y_zero_point came with opset 21");
        remove_attr(n, "output_dtype");
        note(op + ": output_dtype dropped (the zero point's type says it)");
      }
    } else if (op == "GridSample" && opset_ >= 20) {
      const std::string mode = attr_string(n, "mode", "linear");
      if (auto dims = known_dims(chain, n.input(0)); dims && dims->size() != 4)
        refuse(n, "a " + std::to_string(dims->size()) + "-D GridSample came with opset 20");
      const std::string old = mode == "linear" ? "bilinear" : mode == "cubic" ? "bicubic" : mode;
      set_attr(n, "mode", old);
      note("GridSample: mode '" + mode + "' -> '" + old + "'");
    } else if (op == "DFT" && opset_ >= 20) {
      refuse(n, "DFT's opset-20 form (axis as an input) has no reader here");
    }
    out.push_back(std::move(n));
  }

  // Opset 18 moved the axes of every Reduce op but ReduceSum (moved at 13) from an attribute to an
  // optional input, with noop_with_empty_axes.
  void reduction(NodeProto n, const Chain& chain, std::vector<NodeProto>& out) {
    const std::string op = n.op_type();
    const bool noop = attr_int(n, "noop_with_empty_axes", 0) != 0;
    remove_attr(n, "noop_with_empty_axes");
    std::optional<std::vector<int64_t>> axes;
    if (n.input_size() >= 2 && !n.input(1).empty()) {
      axes = constant_ints(chain, n.input(1));
      if (!axes) refuse(n, "its axes are computed in the graph, and opset 17's " + op + " takes them as an attribute");
    }
    while (n.input_size() > 1) n.mutable_input()->RemoveLast();
    if ((!axes || axes->empty()) && noop) {
      n.set_op_type("Identity");
      n.clear_attribute();
      note(op + ": no axes with noop_with_empty_axes -> Identity");
    } else {
      if (axes && !axes->empty()) set_attr(n, "axes", *axes);
      note(op + ": opset-18 form (axes input) -> opset-13 form (axes attribute)");
    }
    out.push_back(std::move(n));
  }

  // Opset 18's num_outputs: chunks of ceil(dim / num_outputs), the last one smaller.
  void split(NodeProto n, const Chain& chain, std::vector<NodeProto>& out) {
    const AttributeProto* a = find_attr(n, "num_outputs");
    if (!a) return out.push_back(std::move(n));
    const int64_t k = a->i();
    if (n.input_size() >= 2 && !n.input(1).empty()) refuse(n, "it has both a split input and num_outputs");
    if (k < 1 || k != n.output_size())
      refuse(n, "num_outputs is " + std::to_string(k) + " for " + std::to_string(n.output_size()) + " outputs");
    remove_attr(n, "num_outputs");
    int64_t axis = attr_int(n, "axis", 0);
    auto dims = known_dims(chain, n.input(0));
    if (dims && axis < 0) axis += static_cast<int64_t>(dims->size());
    std::string sizes;
    if (dims && axis >= 0 && axis < static_cast<int64_t>(dims->size()) && (*dims)[axis]) {
      const int64_t d = *(*dims)[axis], c = (d + k - 1) / k;
      if (d - c * (k - 1) < 0) refuse(n, "a dim of " + std::to_string(d) + " does not split into " + std::to_string(k) + " chunks");
      std::vector<int64_t> v(k, c);
      v.back() = d - c * (k - 1);
      sizes = int64_constant(out, n, v, "split");
      note("Split: num_outputs -> split sizes");
    } else {
      // The dim is known only at run time: the sizes are computed from the input's shape.
      NodeProto shape = make(n, "Shape", {n.input(0)}, fresh(n.output(0) + "/dim"));
      const int64_t raw_axis = attr_int(n, "axis", 0);
      set_attr(shape, "start", raw_axis);
      if (raw_axis != -1) set_attr(shape, "end", raw_axis + 1);
      const std::string d = shape.output(0);
      out.push_back(std::move(shape));
      const std::string km1 = int64_constant(out, n, {k - 1}, "k_minus_1"), kk = int64_constant(out, n, {k}, "k");
      const std::string sum = fresh(n.output(0) + "/dim_plus");
      out.push_back(make(n, "Add", {d, km1}, sum));
      const std::string c = fresh(n.output(0) + "/chunk");
      out.push_back(make(n, "Div", {sum, kk}, c));
      const std::string before = fresh(n.output(0) + "/before_last");
      out.push_back(make(n, "Mul", {c, km1}, before));
      const std::string last = fresh(n.output(0) + "/last");
      out.push_back(make(n, "Sub", {d, before}, last));
      std::vector<std::string> parts(k - 1, c);
      parts.push_back(last);
      sizes = fresh(n.output(0) + "/split");
      NodeProto concat = make(n, "Concat", parts, sizes);
      set_attr(concat, "axis", int64_t{0});
      out.push_back(std::move(concat));
      note("Split: num_outputs -> split sizes computed from the input's shape");
    }
    if (n.input_size() < 2) n.add_input(sizes);
    else n.set_input(1, sizes);
    out.push_back(std::move(n));
  }

  // Opset 18 added Pad's axes input (pads for those axes only); 19 the wrap mode.
  void pad(NodeProto n, const Chain& chain, std::vector<NodeProto>& out) {
    if (attr_string(n, "mode", "constant") == "wrap") refuse(n, "mode 'wrap' came with opset 19");
    if (n.input_size() < 4 || n.input(3).empty()) {
      while (n.input_size() > 3) n.mutable_input()->RemoveLast();
      return out.push_back(std::move(n));
    }
    auto axes = constant_ints(chain, n.input(3));
    if (!axes) refuse(n, "its axes are computed in the graph; opset 17's Pad takes pads for every axis");
    auto pads = n.input(1).empty() ? std::nullopt : constant_ints(chain, n.input(1));
    if (!pads || pads->size() != 2 * axes->size()) refuse(n, "its pads are not a constant of twice the axes' length");
    auto dims = known_dims(chain, n.input(0));
    if (!dims) refuse(n, "the rank of its input is not declared, and opset 17's Pad needs pads for every axis");
    const int64_t rank = static_cast<int64_t>(dims->size());
    std::vector<int64_t> full(2 * rank, 0);
    for (size_t i = 0; i < axes->size(); ++i) {
      int64_t axis = (*axes)[i] < 0 ? (*axes)[i] + rank : (*axes)[i];
      if (axis < 0 || axis >= rank) refuse(n, "axis " + std::to_string((*axes)[i]) + " is out of range");
      full[axis] = (*pads)[i];
      full[axis + rank] = (*pads)[i + axes->size()];
    }
    n.set_input(1, int64_constant(out, n, full, "pads"));
    n.mutable_input()->RemoveLast();
    if (n.input_size() == 3 && n.input(2).empty()) n.mutable_input()->RemoveLast();
    note("Pad: axes input -> pads for every axis");
    out.push_back(std::move(n));
  }

  // Opset 18 added antialias, keep_aspect_ratio_policy and axes; 19 half_pixel_symmetric.
  void resize(NodeProto n, const Chain& chain, std::vector<NodeProto>& out) {
    if (attr_int(n, "antialias", 0) != 0) refuse(n, "antialias came with opset 18");
    if (remove_attr(n, "antialias")) note("Resize: antialias 0 dropped");
    const bool has_sizes = n.input_size() >= 4 && !n.input(3).empty();
    const std::string policy = attr_string(n, "keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch" && has_sizes) refuse(n, "keep_aspect_ratio_policy '" + policy + "' came with opset 18");
    if (remove_attr(n, "keep_aspect_ratio_policy")) note("Resize: keep_aspect_ratio_policy dropped");
    if (attr_string(n, "coordinate_transformation_mode", "half_pixel") == "half_pixel_symmetric")
      refuse(n, "coordinate_transformation_mode 'half_pixel_symmetric' came with opset 19");
    const AttributeProto* axes_attr = find_attr(n, "axes");
    if (!axes_attr) return out.push_back(std::move(n));
    std::vector<int64_t> axes(axes_attr->ints().begin(), axes_attr->ints().end());
    auto dims = known_dims(chain, n.input(0));
    if (!dims) refuse(n, "it resizes some axes only and the rank of its input is not declared");
    const int64_t rank = static_cast<int64_t>(dims->size());
    for (auto& a : axes) a = a < 0 ? a + rank : a;
    remove_attr(n, "axes");
    bool all_in_order = static_cast<int64_t>(axes.size()) == rank;
    for (int64_t i = 0; all_in_order && i < rank; ++i) all_in_order = axes[i] == i;
    if (all_in_order) {
      note("Resize: axes over every dim dropped");
      return out.push_back(std::move(n));
    }
    if (n.input_size() >= 2 && !n.input(1).empty()) {
      auto roi = constant_tensor(chain, n.input(1));
      if (!roi || (roi->dims_size() > 0 && roi->dims(0) > 0)) refuse(n, "a region of interest over some axes only came with opset 18");
    }
    if (has_sizes) {
      auto sizes = constant_ints(chain, n.input(3));
      if (!sizes || sizes->size() != axes.size()) refuse(n, "its sizes over some axes are not a constant");
      std::vector<int64_t> full(rank);
      for (int64_t i = 0; i < rank; ++i) {
        auto it = std::find(axes.begin(), axes.end(), i);
        if (it != axes.end()) full[i] = (*sizes)[it - axes.begin()];
        else if ((*dims)[i]) full[i] = *(*dims)[i];
        else refuse(n, "it leaves dim " + std::to_string(i) + " as it is, and that dim is not declared");
      }
      n.set_input(3, int64_constant(out, n, full, "sizes"));
    } else if (n.input_size() >= 3 && !n.input(2).empty()) {
      auto scales_t = constant_tensor(chain, n.input(2));
      auto scales = scales_t ? floats_of(*scales_t) : std::nullopt;
      if (!scales || scales->size() != axes.size()) refuse(n, "its scales over some axes are not a float constant");
      TensorProto t;
      t.set_data_type(TensorProto::FLOAT);
      t.add_dims(rank);
      for (int64_t i = 0; i < rank; ++i) {
        auto it = std::find(axes.begin(), axes.end(), i);
        t.add_float_data(it != axes.end() ? (*scales)[it - axes.begin()] : 1.0f);
      }
      n.set_input(2, constant(out, n, std::move(t), "scales"));
    }
    note("Resize: axes -> scales or sizes over every dim");
    out.push_back(std::move(n));
  }

  // Gelu (opset 20) as ONNX's own function body, in the form torch's exporter writes at opset 17
  // (the fusion passes recognise it): x * (erf(x / sqrt(2)) + 1) * 0.5, or with tanh.
  void gelu(NodeProto n, const Chain& chain, std::vector<NodeProto>& out) {
    const std::string x = n.input(0), y = n.output(0);
    const int32_t type = known_elem_type(chain, x);
    const std::string approximate = attr_string(n, "approximate", "none");
    auto tmp = [&](const std::string& what) { return fresh(y + "/" + what); };
    std::string inner;
    if (approximate == "none") {
      const std::string sqrt2 = scalar_like(out, n, 1.41421356237309504880, type, x, "sqrt2");
      const std::string d = tmp("div");
      out.push_back(make(n, "Div", {x, sqrt2}, d));
      inner = tmp("erf");
      out.push_back(make(n, "Erf", {d}, inner));
    } else if (approximate == "tanh") {
      const std::string c = scalar_like(out, n, 0.044715, type, x, "c"),
                        three = scalar_like(out, n, 3.0, type, x, "three"),
                        k = scalar_like(out, n, 0.79788456080286535588, type, x, "sqrt_2_over_pi");
      const std::string cube = tmp("cube"), cc = tmp("c_cube"), sum = tmp("sum"), scaled = tmp("scaled");
      out.push_back(make(n, "Pow", {x, three}, cube));
      out.push_back(make(n, "Mul", {cube, c}, cc));
      out.push_back(make(n, "Add", {x, cc}, sum));
      out.push_back(make(n, "Mul", {sum, k}, scaled));
      inner = tmp("tanh");
      out.push_back(make(n, "Tanh", {scaled}, inner));
    } else {
      refuse(n, "approximate '" + approximate + "' is neither 'none' nor 'tanh'");
    }
    const std::string one = scalar_like(out, n, 1.0, type, x, "one"), half = scalar_like(out, n, 0.5, type, x, "half");
    const std::string plus = tmp("plus_one"), times = tmp("times_x");
    out.push_back(make(n, "Add", {inner, one}, plus));
    out.push_back(make(n, "Mul", {x, plus}, times));
    NodeProto last = make(n, "Mul", {times, half}, y);
    last.set_name(n.name().empty() ? fresh(y + "/Gelu") : n.name());
    out.push_back(std::move(last));
    note("Gelu: its function body (Erf or Tanh form)");
  }

  // Mish (opset 18): x * tanh(softplus(x)).
  void mish(NodeProto n, const Chain&, std::vector<NodeProto>& out) {
    const std::string x = n.input(0), y = n.output(0);
    const std::string sp = fresh(y + "/softplus"), t = fresh(y + "/tanh");
    out.push_back(make(n, "Softplus", {x}, sp));
    out.push_back(make(n, "Tanh", {sp}, t));
    NodeProto last = make(n, "Mul", {x, t}, y);
    last.set_name(n.name().empty() ? fresh(y + "/Mish") : n.name());
    out.push_back(std::move(last));
    note("Mish: x * Tanh(Softplus(x))");
  }

  // AffineGrid (opset 20; spatial transformer networks pair it with GridSample): the sampling grid
  // theta [N, r, r+1] maps the output's normalized coordinates to, r = 2 (size [N, C, H, W], grid
  // [N, H, W, 2]) or 3 (size [N, C, D, H, W], grid [N, D, H, W, 3]). As ONNX's function body: per
  // spatial axis of extent L the coordinates of its L positions in [-1, 1], rows (x, y[, z], 1) of
  // them over the output's positions (x along the last axis), times theta transposed. A coordinate
  // is (2i + 1 - L) / L, or with align_corners (2i + 1 - L) / max(L - 1, 1): ONNX's start + i * step,
  // and for L = 1 with align_corners torch's 0 where ONNX's body divides by zero. Computed in the
  // theta's type; for 16-bit thetas in float, rounded once at the end. `size` may be computed in
  // the graph (a constant one gives constants, which the CUDA backend plans with); its length (or
  // theta's shape) must be declared.
  void affine_grid(NodeProto n, const Chain& chain, std::vector<NodeProto>& out) {
    const std::string theta = n.input(0), size = n.input(1), y = n.output(0);
    const bool align = attr_int(n, "align_corners", 0) != 0;
    int64_t r = 0;
    if (auto s = known_dims(chain, size); s && s->size() == 1 && (*s)[0]) {
      r = *(*s)[0] - 2;
      if (r != 2 && r != 3) refuse(n, "its size has " + std::to_string(r + 2) + " values, not 4 (2-D) or 5 (3-D)");
    } else if (auto t = known_dims(chain, theta); t && t->size() == 3 && (*t)[1]) {
      r = *(*t)[1];
    }
    if (r != 2 && r != 3) refuse(n, "the length of its size (4 or 5) is not declared, nor theta's shape");
    const int32_t type = known_elem_type(chain, theta);
    if (type == 0) refuse(n, "the element type of its theta is not declared");
    const bool widen = type == TensorProto::FLOAT16 || type == TensorProto::BFLOAT16;
    const int32_t math = widen ? TensorProto::FLOAT : type;
    auto tmp = [&](const std::string& what) { return fresh(y + "/" + what); };
    const std::string one = constant(out, n, scalar_tensor(1.0, math), "one"),
                      two = constant(out, n, scalar_tensor(2.0, math), "two");
    const std::string zero_i = int64_scalar(out, n, 0, "zero_int"), one_i = int64_scalar(out, n, 1, "one_int");
    // The spatial extents [D,] H, W and the coordinates along each, in the order x (W), y (H)[, z (D)].
    // A constant size (the usual export) gives constants: the CUDA backend plans with their values.
    const std::optional<std::vector<int64_t>> fixed = constant_ints(chain, size);
    if (fixed && fixed->size() != static_cast<size_t>(r + 2))
      refuse(n, "its size has " + std::to_string(fixed->size()) + " values where theta is " + std::to_string(r) + "-D");
    auto part = [&](int64_t begin, int64_t end, const std::string& what) {
      if (fixed) return int64_constant(out, n, {fixed->begin() + begin, fixed->begin() + end}, what);
      const std::string from = int64_constant(out, n, {begin}, what + "_start"),
                        to = int64_constant(out, n, {end}, what + "_end");
      return value(out, n, "Slice", {size, from, to}, what);
    };
    const std::string spatial = part(2, 2 + r, "spatial");
    std::vector<std::string> coords;
    for (int64_t k = 0; k < r; ++k) {
      const int64_t axis = 2 + r - 1 - k;  // x: the last axis of size
      const std::string extent = fixed ? int64_scalar(out, n, (*fixed)[static_cast<size_t>(axis)], "extent")
                                       : value(out, n, "Gather", {size, int64_scalar(out, n, axis, "axis")}, "extent");
      const std::string steps = cast(out, n, value(out, n, "Range", {zero_i, extent, one_i}, "steps"), math, "cast");
      const std::string l = cast(out, n, extent, math, "cast");
      const std::string odd = value(out, n, "Add", {value(out, n, "Mul", {steps, two}, "twice"), one}, "odd");
      const std::string centered = value(out, n, "Sub", {odd, l}, "centered");
      const std::string den = align ? value(out, n, "Max", {value(out, n, "Sub", {l, one}, "gaps"), one}, "spacing") : l;
      std::vector<int64_t> shape(static_cast<size_t>(r), 1);
      shape[static_cast<size_t>(r - 1 - k)] = -1;  // along its own axis of [D,] H, W
      const std::string along = value(out, n, "Reshape", {value(out, n, "Div", {centered, den}, "coordinate"),
                                                int64_constant(out, n, shape, "coordinate_shape")}, "along");
      coords.push_back(value(out, n, "Expand", {along, spatial}, "coordinates"));
    }
    coords.push_back(value(out, n, "Expand", {one, spatial}, "ones"));
    for (std::string& c : coords) c = value(out, n, "Unsqueeze", {c, int64_constant(out, n, {-1}, "last")}, "column");
    NodeProto concat = make(n, "Concat", coords, tmp("base"));
    set_attr(concat, "axis", int64_t{-1});
    const std::string base_grid = concat.output(0);
    out.push_back(std::move(concat));
    const std::string rows = value(out, n, "Reshape", {base_grid, int64_constant(out, n, {-1, r + 1}, "rows_shape")}, "rows");
    NodeProto transpose = make(n, "Transpose", {widen ? cast(out, n, theta, math, "cast") : theta}, tmp("theta_t"));
    set_attr(transpose, "perm", std::vector<int64_t>{0, 2, 1});
    const std::string theta_t = transpose.output(0);
    out.push_back(std::move(transpose));
    const std::string points = value(out, n, "MatMul", {rows, theta_t}, "points");  // [N, positions, r]
    const std::string batch = part(0, 1, "batch");
    const std::string point_size = int64_constant(out, n, {r}, "point_size");
    NodeProto grid_shape = make(n, "Concat", {batch, spatial, point_size}, tmp("grid_shape"));
    set_attr(grid_shape, "axis", int64_t{0});
    const std::string shape = grid_shape.output(0);
    out.push_back(std::move(grid_shape));
    NodeProto last = make(n, "Reshape", {points, shape}, widen ? tmp("grid") : y);
    if (widen) {  // rounded once, at the end
      out.push_back(std::move(last));
      last = make(n, "Cast", {out.back().output(0)}, y);
      set_attr(last, "to", int64_t{type});
    }
    last.set_name(n.name().empty() ? fresh(y + "/AffineGrid") : n.name());
    out.push_back(std::move(last));
    note(std::string("AffineGrid: its function body (") + (r == 2 ? "2-D" : "3-D") + ")");
  }

  // GroupNormalization (opset 18; 21 made scale and bias per channel): normalized over each group
  // of channels, as ONNX's function body: reshape to [N, G, -1], mean and variance over the last
  // axis (in float for 16-bit inputs, stash_type 1), back to the input's shape, then scale and bias.
  void group_norm(NodeProto n, const Chain& chain, std::vector<NodeProto>& out) {
    const std::string x = n.input(0), scale = n.input(1), bias = n.input(2), y = n.output(0);
    const int64_t groups = attr_int(n, "num_groups", 0);
    if (groups < 1) refuse(n, "num_groups is missing or not positive");
    if (attr_int(n, "stash_type", 1) != 1) refuse(n, "stash_type other than float");
    const float eps = find_attr(n, "epsilon") ? find_attr(n, "epsilon")->f() : 1e-5f;
    auto dims = known_dims(chain, x);
    if (!dims || dims->size() < 2) refuse(n, "the rank of its input is not declared");
    const int64_t rank = static_cast<int64_t>(dims->size());
    const int32_t type = known_elem_type(chain, x);
    if (type == 0) refuse(n, "the element type of its input is not declared");
    // Opset 18's scale and bias hold one value per group, 21's one per channel.
    const bool per_channel = opset_ >= 21;
    auto tmp = [&](const std::string& what) { return fresh(y + "/" + what); };
    const bool widen = type == TensorProto::FLOAT16 || type == TensorProto::BFLOAT16;
    const int32_t math = widen ? TensorProto::FLOAT : type;
    const std::string xs = widen ? cast(out, n, x, TensorProto::FLOAT, "cast") : x;
    const std::string grouped_shape = int64_constant(out, n, {0, groups, -1}, "grouped_shape");
    const std::string grouped = tmp("grouped");
    out.push_back(make(n, "Reshape", {xs, grouped_shape}, grouped));
    auto reduce_mean = [&](const std::string& v, const std::string& what) {
      const std::string r = tmp(what);
      NodeProto m = make(n, "ReduceMean", {v}, r);
      set_attr(m, "axes", std::vector<int64_t>{2});
      out.push_back(std::move(m));
      return r;
    };
    const std::string mean = reduce_mean(grouped, "mean");
    const std::string centered = tmp("centered"), square = tmp("square");
    out.push_back(make(n, "Sub", {grouped, mean}, centered));
    out.push_back(make(n, "Mul", {centered, centered}, square));
    const std::string var = reduce_mean(square, "var");
    const std::string eps_c = scalar_like(out, n, eps, math, x, "epsilon");
    const std::string var_eps = tmp("var_eps"), stddev = tmp("std"), normalized = tmp("normalized");
    out.push_back(make(n, "Add", {var, eps_c}, var_eps));
    out.push_back(make(n, "Sqrt", {var_eps}, stddev));
    out.push_back(make(n, "Div", {centered, stddev}, normalized));
    std::string z = normalized;
    if (!per_channel) {  // per-group affine on the [N, G, -1] form
      const std::string gshape = int64_constant(out, n, {1, groups, 1}, "group_param_shape");
      const std::string s = tmp("scale"), b = tmp("bias"), zs = tmp("scaled"), zb = tmp("shifted");
      out.push_back(make(n, "Reshape", {widen ? cast(out, n, scale, TensorProto::FLOAT, "cast") : scale, gshape}, s));
      out.push_back(make(n, "Reshape", {widen ? cast(out, n, bias, TensorProto::FLOAT, "cast") : bias, gshape}, b));
      out.push_back(make(n, "Mul", {z, s}, zs));
      out.push_back(make(n, "Add", {zs, b}, zb));
      z = zb;
    }
    const std::string x_shape = tmp("input_shape"), back = tmp("ungrouped");
    out.push_back(make(n, "Shape", {x}, x_shape));
    out.push_back(make(n, "Reshape", {z, x_shape}, back));
    z = back;
    if (per_channel) {  // per-channel affine, [C] broadcast as [1, C, 1, ...]
      std::vector<int64_t> shape(rank, 1);
      shape[1] = -1;
      const std::string cshape = int64_constant(out, n, shape, "channel_param_shape");
      const std::string s = tmp("scale"), b = tmp("bias"), zs = tmp("scaled"), zb = tmp("shifted");
      out.push_back(make(n, "Reshape", {widen ? cast(out, n, scale, TensorProto::FLOAT, "cast") : scale, cshape}, s));
      out.push_back(make(n, "Reshape", {widen ? cast(out, n, bias, TensorProto::FLOAT, "cast") : bias, cshape}, b));
      out.push_back(make(n, "Mul", {z, s}, zs));
      out.push_back(make(n, "Add", {zs, b}, zb));
      z = zb;
    }
    if (widen) {
      NodeProto c = make(n, "Cast", {z}, y);
      set_attr(c, "to", int64_t{type});
      c.set_name(n.name().empty() ? fresh(y + "/GroupNormalization") : n.name());
      out.push_back(std::move(c));
    } else {
      NodeProto id = make(n, "Identity", {z}, y);
      id.set_name(n.name().empty() ? fresh(y + "/GroupNormalization") : n.name());
      out.push_back(std::move(id));
    }
    note(std::string("GroupNormalization: its function body (scale and bias per ") + (per_channel ? "channel" : "group") + ")");
  }

  // ---- Opsets 23 and 24 ----

  // A node of `op` from `from`, appended to `out`, writing a fresh value named after from's first
  // output; returns that node (valid until the next append).
  NodeProto& emit(std::vector<NodeProto>& out, const NodeProto& from, const std::string& op,
                  std::vector<std::string> inputs, const std::string& what) {
    out.push_back(make(from, op, std::move(inputs), fresh(from.output(0) + "/" + what)));
    return out.back();
  }
  std::string value(std::vector<NodeProto>& out, const NodeProto& from, const std::string& op,
                    std::vector<std::string> inputs, const std::string& what) {
    return emit(out, from, op, std::move(inputs), what).output(0);
  }
  // dims [start, end) of x's shape, a 1-D int64 tensor.
  std::string shape_slice(std::vector<NodeProto>& out, const NodeProto& from, const std::string& x, int64_t start,
                          int64_t end, const std::string& what) {
    NodeProto& s = emit(out, from, "Shape", {x}, what);
    set_attr(s, "start", start);
    set_attr(s, "end", end);
    return s.output(0);
  }
  // dim `axis` of x as an int64 scalar.
  std::string dim_scalar(std::vector<NodeProto>& out, const NodeProto& from, const std::string& x, int64_t axis,
                         const std::string& what) {
    const std::string d = shape_slice(out, from, x, axis, axis + 1, what + "_dim");
    return value(out, from, "Squeeze", {d, int64_constant(out, from, {0}, what + "_axis")}, what);
  }
  std::string transpose(std::vector<NodeProto>& out, const NodeProto& from, const std::string& x,
                        const std::vector<int64_t>& perm, const std::string& what) {
    NodeProto& t = emit(out, from, "Transpose", {x}, what);
    set_attr(t, "perm", perm);
    return t.output(0);
  }
  std::string cast(std::vector<NodeProto>& out, const NodeProto& from, const std::string& x, int64_t to,
                   const std::string& what) {
    NodeProto& c = emit(out, from, "Cast", {x}, what);
    set_attr(c, "to", to);
    return c.output(0);
  }
  std::string reduce_last(std::vector<NodeProto>& out, const NodeProto& from, const std::string& op,
                          const std::string& x, const std::string& what) {
    NodeProto& r = emit(out, from, op, {x}, what);
    set_attr(r, "axes", std::vector<int64_t>{-1});
    set_attr(r, "keepdims", int64_t{1});
    return r.output(0);
  }
  // The last node of a lowering: writes `y` and keeps the lowered node's name.
  void finish(std::vector<NodeProto>& out, const NodeProto& from, const std::string& op,
              std::vector<std::string> inputs, const std::string& y) {
    NodeProto last = make(from, op, std::move(inputs), y);
    last.set_name(from.name().empty() ? fresh(y + "/" + from.op_type()) : from.name());
    out.push_back(std::move(last));
  }

  // Attention (opset 23; 24 added nonpad_kv_seqlen) as its definition computes it, in opset-17
  // ops: 3-D inputs split into heads, the past cache concatenated, grouped key/value heads
  // repeated (each serves q_num_heads / kv_num_heads query heads in turn), scores = Q K^T * scale
  // (ONNX scales Q and K by sqrt(scale) each: the same product within a rounding), softcap, the
  // bias (a bool mask true where a key takes part, a float or integer one added, the causal
  // frontier j <= i + offset with offset the past length or, with nonpad_kv_seqlen, that minus
  // the query length, keys at or past nonpad_kv_seqlen hidden), a softmax over the keys (in
  // softmax_precision when given), a fully hidden row giving zeros, then P V. The attention
  // recogniser (passes/fusion/recognize_attention.h) makes this one ai.onnx_amp Attention again
  // for training where its kernels apply.
  void attention(NodeProto n, const Chain& chain, std::vector<NodeProto>& out) {
    auto in = [&](int i) { return i < n.input_size() ? n.input(i) : std::string(); };
    auto wanted = [&](int i) { return i < n.output_size() && !n.output(i).empty(); };
    const std::string q_in = in(0), k_in = in(1), v_in = in(2), mask = in(3), past_k = in(4), past_v = in(5),
                      nonpad = in(6);
    if (q_in.empty() || k_in.empty() || v_in.empty()) refuse(n, "it needs Q, K and V");
    if (past_k.empty() != past_v.empty()) refuse(n, "past_key and past_value come together or not at all");
    if (!nonpad.empty() && !past_k.empty()) refuse(n, "nonpad_kv_seqlen does not go with a past cache");
    const int64_t mode = attr_int(n, "qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3) refuse(n, "qk_matmul_output_mode " + std::to_string(mode) + " is not 0 to 3");
    const int32_t type = known_elem_type(chain, q_in);
    const bool heads_given = find_attr(n, "q_num_heads") || find_attr(n, "kv_num_heads");
    const auto q_dims = known_dims(chain, q_in), k_dims = known_dims(chain, k_in);
    // 3-D inputs need the head counts; without a declared rank, their presence says 3-D.
    const int64_t rank = q_dims ? static_cast<int64_t>(q_dims->size()) : heads_given ? 3 : 4;
    if (rank != 3 && rank != 4) refuse(n, "Q has rank " + std::to_string(rank) + " (3 or 4)");
    int64_t hq = attr_int(n, "q_num_heads", 0), hkv = attr_int(n, "kv_num_heads", 0);
    std::optional<int64_t> head_size, tq;
    int64_t tk = -1;  // the keys' length, past included, when declared
    std::string q = q_in, k = k_in, v = v_in;
    if (rank == 3) {
      if (hq < 1 || hkv < 1) refuse(n, "3-D Q, K and V need q_num_heads and kv_num_heads");
      auto heads_first = [&](const std::string& x, int64_t heads, const std::string& what) {
        const std::string split = value(out, n, "Reshape", {x, int64_constant(out, n, {0, 0, heads, -1}, what + "_shape")},
                                        what + "_heads");
        return transpose(out, n, split, {0, 2, 1, 3}, what + "_bhsd");
      };
      q = heads_first(q_in, hq, "q");
      k = heads_first(k_in, hkv, "k");
      v = heads_first(v_in, hkv, "v");
      if (q_dims && (*q_dims)[2]) head_size = *(*q_dims)[2] / hq;
      if (q_dims && (*q_dims)[1]) tq = (*q_dims)[1];
      if (k_dims && k_dims->size() == 3 && (*k_dims)[1]) tk = *(*k_dims)[1];
    } else {
      if (q_dims && (*q_dims)[1]) hq = *(*q_dims)[1];
      if (k_dims && k_dims->size() == 4 && (*k_dims)[1]) hkv = *(*k_dims)[1];
      if (q_dims && (*q_dims)[3]) head_size = (*q_dims)[3];
      if (q_dims && (*q_dims)[2]) tq = (*q_dims)[2];
      if (k_dims && k_dims->size() == 4 && (*k_dims)[2]) tk = *(*k_dims)[2];
    }
    std::optional<int64_t> past_len = 0;
    if (!past_k.empty()) {
      const auto p = known_dims(chain, past_k);
      past_len = p && p->size() == 4 ? (*p)[2] : std::nullopt;
      auto concat = [&](const std::string& past, const std::string& x, const std::string& what) {
        NodeProto& c = emit(out, n, "Concat", {past, x}, what);
        set_attr(c, "axis", int64_t{2});
        return c.output(0);
      };
      k = concat(past_k, k, "present_key");
      v = concat(past_v, v, "present_value");
    }
    tk = tk >= 0 && past_len ? tk + *past_len : -1;
    if (wanted(1)) out.push_back(make(n, "Identity", {k}, n.output(1)));
    if (wanted(2)) out.push_back(make(n, "Identity", {v}, n.output(2)));
    if (hq > 0 && hkv > 0 && hq != hkv) {
      if (hq % hkv != 0) refuse(n, std::to_string(hq) + " query heads do not split into " + std::to_string(hkv) + " groups");
      const int64_t reps = hq / hkv;
      auto repeat = [&](const std::string& x, const std::string& what) {
        const std::string u = value(out, n, "Unsqueeze", {x, int64_constant(out, n, {2}, what + "_axis")}, what + "_5d");
        const std::string e = value(out, n, "Expand", {u, int64_constant(out, n, {1, 1, reps, 1, 1}, what + "_reps")},
                                    what + "_repeated");
        NodeProto& c = emit(out, n, "Concat",
                            {shape_slice(out, n, x, 0, 1, what + "_batch"), int64_constant(out, n, {-1}, what + "_heads"),
                             shape_slice(out, n, x, 2, 4, what + "_rest")},
                            what + "_shape");
        set_attr(c, "axis", int64_t{0});
        const std::string shape = c.output(0);
        return value(out, n, "Reshape", {e, shape}, what + "_grouped");
      };
      k = repeat(k, "k");
      v = repeat(v, "v");
    }
    // Scores.
    const std::string kt = transpose(out, n, k, {0, 1, 3, 2}, "kt");
    std::string s = value(out, n, "MatMul", {q, kt}, "scores");
    std::string scale;
    if (const AttributeProto* a = find_attr(n, "scale")) {
      scale = scalar_like(out, n, a->f(), type, q_in, "scale");
    } else if (head_size) {
      scale = scalar_like(out, n, 1.0 / std::sqrt(static_cast<double>(*head_size)), type, q_in, "scale");
    } else {  // 1 / sqrt(head size), the head size known at run time
      const std::string d = cast(out, n, shape_slice(out, n, q, 3, 4, "head_size"), TensorProto::FLOAT, "head_size_float");
      const std::string r = value(out, n, "Reciprocal", {value(out, n, "Sqrt", {d}, "sqrt_head_size")}, "scale_float");
      scale = value(out, n, "CastLike", {r, q_in}, "scale");
    }
    s = value(out, n, "Mul", {s, scale}, "scaled_scores");
    const std::string scaled = s;
    if (const float cap = attr_float(n, "softcap", 0.0f); cap > 0) {
      const std::string c = scalar_like(out, n, cap, type, q_in, "softcap");
      s = value(out, n, "Mul", {value(out, n, "Tanh", {value(out, n, "Div", {s, c}, "capped")}, "capped_tanh"), c}, "softcapped");
    }
    const std::string capped = s;
    // The bias: bool tensors hiding keys, and a float one added.
    std::vector<std::string> hides;
    std::string bias;
    std::string neg_inf_value, zero_value;  // made when first used
    auto neg_inf = [&]() {
      if (neg_inf_value.empty())
        neg_inf_value = scalar_like(out, n, -std::numeric_limits<double>::infinity(), type, q_in, "neg_inf");
      return neg_inf_value;
    };
    auto zero = [&]() {
      if (zero_value.empty()) zero_value = scalar_like(out, n, 0.0, type, q_in, "zero");
      return zero_value;
    };
    if (!mask.empty()) {
      const int32_t mask_type = known_elem_type(chain, mask);
      if (mask_type == 0) refuse(n, "the element type of its attn_mask is not declared");
      const auto mask_dims = known_dims(chain, mask);
      if (!mask_dims || mask_dims->empty()) refuse(n, "the rank of its attn_mask is not declared");
      const int64_t mask_rank = static_cast<int64_t>(mask_dims->size());
      const bool is_bool = mask_type == TensorProto::BOOL;
      const bool same_length = tk >= 0 && mask_dims->back() && *mask_dims->back() == tk;
      std::string m = mask;
      if (is_bool && same_length) {
        hides.push_back(value(out, n, "Not", {mask}, "mask_hides"));
      } else {
        if (is_bool) m = value(out, n, "Where", {mask, zero(), neg_inf()}, "mask_bias");
        else if (mask_type != type || type == 0) m = value(out, n, "CastLike", {mask, q_in}, "mask_bias");
        if (!same_length) {  // a mask shorter than the keys is padded with -inf
          const std::string total = shape_slice(out, n, k, 2, 3, "keys");
          const std::string have = shape_slice(out, n, m, mask_rank - 1, mask_rank, "mask_keys");
          const std::string missing = value(out, n, "Sub", {total, have}, "mask_missing");
          std::vector<int64_t> before(static_cast<size_t>(2 * mask_rank - 1), 0);
          NodeProto& c = emit(out, n, "Concat", {int64_constant(out, n, before, "mask_pads_before"), missing}, "mask_pads");
          set_attr(c, "axis", int64_t{0});
          const std::string pads = c.output(0);
          m = value(out, n, "Pad", {m, pads, neg_inf()}, "mask_padded");
        }
        bias = m;
      }
    }
    const bool causal = attr_int(n, "is_causal", 0) != 0;
    std::string cols;  // key positions 0..Tk-1
    auto key_positions = [&]() {
      if (cols.empty()) {
        cols = value(out, n, "Range",
                     {int64_scalar(out, n, 0, "range_start"), dim_scalar(out, n, k, 2, "total_keys"),
                      int64_scalar(out, n, 1, "range_step")},
                     "key_positions");
      }
      return cols;
    };
    if (causal) {
      const int64_t rows_n = tq.value_or(0), cols_n = tk, offset = past_len.value_or(0);
      if (tq && tk >= 0 && past_len && nonpad.empty() && rows_n * cols_n <= (int64_t{1} << 24)) {
        TensorProto t;  // constant: hidden where key j > query i + past length
        t.set_data_type(TensorProto::BOOL);
        t.add_dims(rows_n);
        t.add_dims(cols_n);
        for (int64_t i = 0; i < rows_n; ++i)
          for (int64_t j = 0; j < cols_n; ++j) t.add_int32_data(j > i + offset ? 1 : 0);
        hides.push_back(constant(out, n, std::move(t), "causal_hides"));
      } else {
        std::string rows = value(out, n, "Range",
                                 {int64_scalar(out, n, 0, "range_start"), dim_scalar(out, n, q, 2, "queries"),
                                  int64_scalar(out, n, 1, "range_step")},
                                 "query_positions");
        rows = value(out, n, "Unsqueeze", {rows, int64_constant(out, n, {1}, "rows_axis")}, "query_column");
        if (!past_k.empty()) {
          rows = value(out, n, "Add", {rows, dim_scalar(out, n, past_k, 2, "past_length")}, "query_frontier");
        } else if (!nonpad.empty()) {  // offset nonpad_kv_seqlen[b] - Tq, as [B, 1, 1, 1]
          const std::string per_batch =
              value(out, n, "Reshape", {nonpad, int64_constant(out, n, {-1, 1, 1, 1}, "batch_shape")}, "nonpad_b");
          const std::string offset = value(out, n, "Sub", {per_batch, dim_scalar(out, n, q, 2, "queries_n")}, "offset");
          rows = value(out, n, "Add", {rows, offset}, "query_frontier");
        }
        hides.push_back(value(out, n, "Greater", {key_positions(), rows}, "causal_hides"));
      }
    }
    if (!nonpad.empty()) {  // keys at or past nonpad_kv_seqlen[b] hidden, as [B, 1, 1, Tk]
      const std::string per_batch =
          value(out, n, "Reshape", {nonpad, int64_constant(out, n, {-1, 1, 1, 1}, "batch_shape")}, "nonpad_keys");
      hides.push_back(value(out, n, "GreaterOrEqual", {key_positions(), per_batch}, "padding_hides"));
    }
    std::string hide;
    for (const std::string& h : hides) hide = hide.empty() ? h : value(out, n, "Or", {hide, h}, "hides");
    // A row may be hidden whole when a mask or the key lengths decide; the causal frontier alone
    // (offset >= 0) always leaves key 0.
    const bool rows_may_empty = !mask.empty() || !nonpad.empty();
    std::string empty_row;
    if (!bias.empty()) {
      if (!hide.empty()) bias = value(out, n, "Where", {hide, neg_inf(), bias}, "bias");
      s = value(out, n, "Add", {s, bias}, "masked_scores");
      if (rows_may_empty) {
        NodeProto& isinf = emit(out, n, "IsInf", {reduce_last(out, n, "ReduceMax", bias, "bias_row_max")}, "row_hidden");
        set_attr(isinf, "detect_positive", int64_t{0});
        empty_row = isinf.output(0);
      }
    } else if (!hide.empty()) {
      s = value(out, n, "Where", {hide, neg_inf(), s}, "masked_scores");
      if (rows_may_empty) {
        const std::string h = reduce_last(out, n, "ReduceMin", cast(out, n, hide, TensorProto::FLOAT, "hides_float"),
                                          "row_min_hidden");
        empty_row = cast(out, n, h, TensorProto::BOOL, "row_hidden");
      }
    }
    const std::string masked = s;
    if (const AttributeProto* sp = find_attr(n, "softmax_precision"); sp && sp->i() != 0 && sp->i() != type)
      s = cast(out, n, s, sp->i(), "softmax_input");
    NodeProto& softmax = emit(out, n, "Softmax", {s}, "probabilities");
    set_attr(softmax, "axis", int64_t{-1});
    std::string p = softmax.output(0);
    if (const AttributeProto* sp = find_attr(n, "softmax_precision"); sp && sp->i() != 0 && sp->i() != type)
      p = value(out, n, "CastLike", {p, q_in}, "probabilities_t");
    if (!empty_row.empty()) p = value(out, n, "Where", {empty_row, zero(), p}, "probabilities_guarded");
    if (wanted(3)) {
      const std::string& shown = mode == 0 ? scaled : mode == 1 ? capped : mode == 2 ? masked : p;
      out.push_back(make(n, "Identity", {shown}, n.output(3)));
    }
    note("Attention: its definition in opset-17 ops (MatMul, Softmax, ...)");
    if (rank == 4) return finish(out, n, "MatMul", {p, v}, n.output(0));
    const std::string y = transpose(out, n, value(out, n, "MatMul", {p, v}, "heads_out"), {0, 2, 1, 3}, "bshd");
    finish(out, n, "Reshape", {y, int64_constant(out, n, {0, 0, -1}, "merged_shape")}, n.output(0));
  }

  // RMSNormalization (opset 23): X / sqrt(mean(X^2 over axes axis..-1) + epsilon) * scale, the
  // first stage in float for 16-bit X (stash_type 1).
  void rms_norm(NodeProto n, const Chain& chain, std::vector<NodeProto>& out) {
    if (n.input_size() < 2 || n.input(1).empty()) refuse(n, "it needs X and scale");
    const std::string x = n.input(0), scale = n.input(1), y = n.output(0);
    const int32_t type = known_elem_type(chain, x);
    if (type == 0) refuse(n, "the element type of its input is not declared");
    const int64_t axis = attr_int(n, "axis", -1), stash = attr_int(n, "stash_type", 1);
    std::vector<int64_t> axes;
    if (axis < 0) {
      for (int64_t a = axis; a < 0; ++a) axes.push_back(a);
    } else {
      const auto dims = known_dims(chain, x);
      if (!dims) refuse(n, "axis " + std::to_string(axis) + " needs the rank of its input, which is not declared");
      for (int64_t a = axis; a < static_cast<int64_t>(dims->size()); ++a) axes.push_back(a);
      if (axes.empty()) refuse(n, "axis " + std::to_string(axis) + " is out of range");
    }
    const bool widen = (type == TensorProto::FLOAT16 || type == TensorProto::BFLOAT16) && stash == TensorProto::FLOAT;
    if (!widen && stash != TensorProto::FLOAT && stash != type) refuse(n, "stash_type " + std::to_string(stash));
    const int32_t math = widen ? TensorProto::FLOAT : type;
    const std::string xs = widen ? cast(out, n, x, TensorProto::FLOAT, "x_float") : x;
    const std::string square = value(out, n, "Mul", {xs, xs}, "square");
    NodeProto& mean = emit(out, n, "ReduceMean", {square}, "mean_square");
    set_attr(mean, "axes", axes);
    set_attr(mean, "keepdims", int64_t{1});
    const std::string ms = mean.output(0);
    const float eps = find_attr(n, "epsilon") ? find_attr(n, "epsilon")->f() : 1e-5f;
    const std::string rms = value(out, n, "Sqrt", {value(out, n, "Add", {ms, scalar_like(out, n, eps, math, xs, "epsilon")}, "mean_square_eps")}, "rms");
    std::string normalized = value(out, n, "Div", {xs, rms}, "normalized");
    const int32_t scale_type = known_elem_type(chain, scale);
    const int32_t to = scale_type != 0 ? scale_type : type;
    if (to != math) normalized = cast(out, n, normalized, to, "normalized_cast");
    finish(out, n, "Mul", {normalized, scale}, y);
    note("RMSNormalization: its function body");
  }

  // Swish (opset 24): X * Sigmoid(alpha X).
  void swish(NodeProto n, const Chain& chain, std::vector<NodeProto>& out) {
    const std::string x = n.input(0);
    const float alpha = attr_float(n, "alpha", 1.0f);
    std::string z = x;
    if (alpha != 1.0f) z = value(out, n, "Mul", {x, scalar_like(out, n, alpha, known_elem_type(chain, x), x, "alpha")}, "alpha_x");
    finish(out, n, "Mul", {x, value(out, n, "Sigmoid", {z}, "sigmoid")}, n.output(0));
    note("Swish: X * Sigmoid(alpha X)");
  }

  // RotaryEmbedding (opset 23), as its definition: [B, S, H, D] heads (from [B, H, S, D], or from
  // [B, S, H*D] with num_heads), the first rotary_embedding_dim of D rotated by the cos / sin rows
  // of each position (gathered by position_ids when given), halves or interleaved pairs.
  void rotary_embedding(NodeProto n, const Chain& chain, std::vector<NodeProto>& out) {
    if (n.input_size() < 3) refuse(n, "it needs X, cos_cache and sin_cache");
    const std::string x = n.input(0), y = n.output(0);
    std::string cos = n.input(1), sin = n.input(2);
    const std::string positions = n.input_size() > 3 ? n.input(3) : std::string();
    const int64_t heads = attr_int(n, "num_heads", 0), rotary = attr_int(n, "rotary_embedding_dim", 0);
    const bool interleaved = attr_int(n, "interleaved", 0) != 0;
    const auto dims = known_dims(chain, x);
    const int64_t rank = dims ? static_cast<int64_t>(dims->size()) : heads > 0 ? 3 : 4;
    if (rank != 3 && rank != 4) refuse(n, "X has rank " + std::to_string(rank) + " (3 or 4)");
    if (rank == 3 && heads < 1) refuse(n, "a 3-D X needs num_heads");
    const std::string bshd = rank == 4 ? transpose(out, n, x, {0, 2, 1, 3}, "bshd")
                                       : value(out, n, "Reshape", {x, int64_constant(out, n, {0, 0, heads, -1}, "heads_shape")}, "bshd");
    if (!positions.empty()) {
      cos = value(out, n, "Gather", {cos, positions}, "cos_rows");
      sin = value(out, n, "Gather", {sin, positions}, "sin_rows");
    }
    const std::string axis2 = int64_constant(out, n, {2}, "heads_axis");
    cos = value(out, n, "Unsqueeze", {cos, axis2}, "cos");
    sin = value(out, n, "Unsqueeze", {sin, axis2}, "sin");
    const std::string last = int64_constant(out, n, {-1}, "last_axis");
    auto slice = [&](const std::string& v, int64_t start, int64_t end, int64_t step, const std::string& what) {
      return value(out, n, "Slice",
                   {v, int64_constant(out, n, {start}, what + "_start"), int64_constant(out, n, {end}, what + "_end"), last,
                    int64_constant(out, n, {step}, what + "_step")},
                   what);
    };
    constexpr int64_t kToEnd = std::numeric_limits<int64_t>::max();
    const std::string rotated_in = rotary > 0 ? slice(bshd, 0, rotary, 1, "x_rotate") : bshd;
    std::string x1, x2;
    if (interleaved) {
      x1 = slice(rotated_in, 0, kToEnd, 2, "x_even");
      x2 = slice(rotated_in, 1, kToEnd, 2, "x_odd");
    } else {
      NodeProto split = make(n, "Split", {rotated_in}, fresh(y + "/x_first_half"));
      split.add_output(fresh(y + "/x_second_half"));
      set_attr(split, "axis", int64_t{-1});
      x1 = split.output(0);
      x2 = split.output(1);
      out.push_back(std::move(split));
    }
    const std::string real = value(out, n, "Sub", {value(out, n, "Mul", {cos, x1}, "cos_x1"), value(out, n, "Mul", {sin, x2}, "sin_x2")}, "real");
    const std::string imag = value(out, n, "Add", {value(out, n, "Mul", {sin, x1}, "sin_x1"), value(out, n, "Mul", {cos, x2}, "cos_x2")}, "imag");
    std::string rotated;
    if (interleaved) {
      const std::string r = value(out, n, "Unsqueeze", {real, last}, "real_pair");
      const std::string i = value(out, n, "Unsqueeze", {imag, last}, "imag_pair");
      NodeProto& c = emit(out, n, "Concat", {r, i}, "pairs");
      set_attr(c, "axis", int64_t{-1});
      const std::string pairs = c.output(0);
      rotated = value(out, n, "Reshape", {pairs, value(out, n, "Shape", {rotated_in}, "rotate_shape")}, "rotated");
    } else {
      NodeProto& c = emit(out, n, "Concat", {real, imag}, "rotated");
      set_attr(c, "axis", int64_t{-1});
      rotated = c.output(0);
    }
    if (rotary > 0) {
      NodeProto& c = emit(out, n, "Concat", {rotated, slice(bshd, rotary, kToEnd, 1, "x_pass")}, "embedded");
      set_attr(c, "axis", int64_t{-1});
      rotated = c.output(0);
    }
    if (rank == 4) {
      NodeProto last_node = make(n, "Transpose", {rotated}, y);
      set_attr(last_node, "perm", std::vector<int64_t>{0, 2, 1, 3});
      last_node.set_name(n.name().empty() ? fresh(y + "/RotaryEmbedding") : n.name());
      out.push_back(std::move(last_node));
    } else {
      finish(out, n, "Reshape", {rotated, value(out, n, "Shape", {x}, "x_shape")}, y);
    }
    note("RotaryEmbedding: its definition in opset-17 ops");
  }

  // TensorScatter (opset 24): the cache with `update` written along `axis` from write_indices[b]
  // (0 without them; modulo the cache length in mode circular): a ScatterElements whose indices
  // are write_indices[b] + s broadcast to the update's shape.
  void tensor_scatter(NodeProto n, const Chain& chain, std::vector<NodeProto>& out) {
    if (n.input_size() < 2) refuse(n, "it needs past_cache and update");
    const std::string past = n.input(0), update = n.input(1);
    const std::string writes = n.input_size() > 2 ? n.input(2) : std::string();
    const auto dims = known_dims(chain, past);
    if (!dims) refuse(n, "the rank of its past_cache is not declared");
    const int64_t rank = static_cast<int64_t>(dims->size());
    int64_t axis = attr_int(n, "axis", -2);
    if (axis < 0) axis += rank;
    if (axis <= 0 || axis >= rank) refuse(n, "axis " + std::to_string(attr_int(n, "axis", -2)) + " (not the batch axis, within the rank)");
    const std::string mode = attr_string(n, "mode", "linear");
    if (mode != "linear" && mode != "circular") refuse(n, "mode '" + mode + "'");
    std::vector<int64_t> along(static_cast<size_t>(rank), 1), batch(static_cast<size_t>(rank), 1);
    along[static_cast<size_t>(axis)] = -1;
    batch[0] = -1;
    const std::string steps = value(out, n, "Range",
                                    {int64_scalar(out, n, 0, "range_start"), dim_scalar(out, n, update, axis, "update_length"),
                                     int64_scalar(out, n, 1, "range_step")},
                                    "steps");
    std::string index = value(out, n, "Reshape", {steps, int64_constant(out, n, along, "steps_shape")}, "steps_along");
    if (!writes.empty())
      index = value(out, n, "Add", {index, value(out, n, "Reshape", {writes, int64_constant(out, n, batch, "writes_shape")}, "writes")}, "positions");
    if (mode == "circular") index = value(out, n, "Mod", {index, shape_slice(out, n, past, axis, axis + 1, "cache_length")}, "positions_wrapped");
    index = value(out, n, "Expand", {index, value(out, n, "Shape", {update}, "update_shape")}, "indices");
    NodeProto last = make(n, "ScatterElements", {past, index, update}, n.output(0));
    set_attr(last, "axis", axis);
    last.set_name(n.name().empty() ? fresh(n.output(0) + "/TensorScatter") : n.name());
    out.push_back(std::move(last));
    note("TensorScatter: ScatterElements at write_indices + position");
  }

  onnx::ModelProto& p_;
  const std::string path_;
  const int64_t opset_;
  NameAllocator names_;
  std::map<std::string, int> notes_;
  bool carried_ = false;
};

void check_ir8_types(const onnx::ModelProto& p_, const std::string& path_) {
  auto check = [&](int64_t t, const std::string& where) {
    if (!ir8_type(t))
      throw InputError(path_ + ": " + where + " has element type " + std::to_string(t) +
                       " (float8, int4 or float4, after IR version 8), which this build does not read");
  };
  std::function<void(const onnx::TypeProto&, const std::string&)> check_type = [&](const onnx::TypeProto& t,
                                                                                    const std::string& where) {
    if (t.has_tensor_type()) check(t.tensor_type().elem_type(), where);
    if (t.has_sequence_type()) check_type(t.sequence_type().elem_type(), where);
    if (t.has_optional_type()) check_type(t.optional_type().elem_type(), where);
  };
  std::function<void(const GraphProto&)> graph = [&](const GraphProto& g) {
    for (const auto* list : {&g.input(), &g.output(), &g.value_info()})
      for (const auto& vi : *list)
        if (vi.has_type()) check_type(vi.type(), "'" + vi.name() + "'");
    for (const auto& t : g.initializer()) check(t.data_type(), "initializer '" + t.name() + "'");
    for (const auto& n : g.node())
      for (const auto& a : n.attribute()) {
        if (a.has_t()) check(a.t().data_type(), node_label(n));
        if ((a.name() == "to" || a.name() == "dtype" || a.name() == "output_dtype") && a.type() == AttributeProto::INT)
          check(a.i(), node_label(n));
        if (a.has_g()) graph(a.g());
        for (const auto& sub : a.graphs()) graph(sub);
      }
  };
  graph(p_.graph());
}


// Ops whose lowering reads dims of their inputs (Attention's head size and lengths, ...), which a
// model rarely declares for intermediate values.
const std::set<std::string> kLoweringReadsDims = {"Attention", "RotaryEmbedding", "RMSNormalization", "TensorScatter"};

bool reads_dims(const GraphProto& g) {
  for (const NodeProto& n : g.node()) {
    if (default_domain(n.domain()) && kLoweringReadsDims.count(n.op_type())) return true;
    for (const auto& a : n.attribute()) {
      if (a.has_g() && reads_dims(a.g())) return true;
      for (const auto& sub : a.graphs())
        if (reads_dims(sub)) return true;
    }
  }
  return false;
}

// Declares in p's main graph the types ONNX's shape inference finds for its node outputs: a first
// lowering (its ops given their computed forms where dims are unknown) is shape-inferred as the
// opset-17 model it is, and what it finds for the values both share lets the real lowering take
// the dims as known (Attention's scale a constant, its causal frontier a constant the attention
// recogniser reads). Large initializers are declared, not copied. Best effort: when the first
// lowering or the inference fails, nothing is declared and the real lowering says what is wrong.
void declare_inferred_dims(onnx::ModelProto& p, const std::string& path, int64_t opset) {
  if (!reads_dims(p.graph())) return;
  // The copy is made without the initializers (swapped out of p for it), then given the small ones.
  google::protobuf::RepeatedPtrField<TensorProto> initializers;
  initializers.Swap(p.mutable_graph()->mutable_initializer());
  onnx::ModelProto probe;
  probe.CopyFrom(p);
  initializers.Swap(p.mutable_graph()->mutable_initializer());
  for (const TensorProto& t : p.graph().initializer()) {
    if (t.dims_size() > 0 && t.ByteSizeLong() > 4096) {
      onnx::ValueInfoProto* vi = probe.mutable_graph()->add_input();
      vi->set_name(t.name());
      auto* tt = vi->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(t.data_type());
      for (int64_t d : t.dims()) tt->mutable_shape()->add_dim()->set_dim_value(d);
    } else {
      *probe.mutable_graph()->add_initializer() = t;
    }
  }
  try {
    Lowering(probe, path, opset).run();
    register_amp_op_schemas();
    onnx::ShapeInferenceOptions options(/*check_type=*/false, /*strict_mode=*/0, /*data_prop=*/false);
    onnx::shape_inference::InferShapes(probe, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception&) {
    return;
  }
  std::set<std::string> declared, produced;
  for (const auto* list : {&p.graph().input(), &p.graph().output(), &p.graph().value_info()})
    for (const auto& vi : *list) declared.insert(vi.name());
  for (const NodeProto& n : p.graph().node())
    for (const std::string& o : n.output()) produced.insert(o);
  for (const onnx::ValueInfoProto& vi : probe.graph().value_info())
    if (produced.count(vi.name()) && !declared.count(vi.name())) *p.mutable_graph()->add_value_info() = vi;
}

}  // namespace

bool is_carried_newer_op(const std::string& domain, const std::string& op) {
  return domain == kAmpDomain && (kNoOpset17Form.count(op) || op == "ScatterElements" || op == "ScatterND");
}

int expand_carried_ops(onnx::ModelProto& p, const std::string& path) {
  return Lowering(p, path, 17).expand_carried_ops();
}

bool lower_ir_version(onnx::ModelProto& p, const std::string& path) {
  if (p.ir_version() <= 8) return false;
  check_ir8_types(p, path);
  p.set_ir_version(8);
  return true;
}

std::vector<std::string> lower_to_opset_17(onnx::ModelProto& p, const std::string& path) {
  int64_t opset = 0;
  for (const auto& o : p.opset_import())
    if (default_domain(o.domain())) opset = o.version();
  if (opset <= 17) return {};
  if (opset > kNewestReadableOpset)
    throw InputError(path + ": unsupported opset " + std::to_string(opset) + " of domain 'ai.onnx' (this build reads up to opset " +
                     std::to_string(kNewestReadableOpset) + ")");
  declare_inferred_dims(p, path, opset);
  return Lowering(p, path, opset).run();
}

}  // namespace amp
