// What a CPU kernel is: an object made once per node at compile time (attributes parsed there),
// asked per input-shape signature for its outputs' types and dims — the op's shape rule
// (graph/ops/shape_rules.h), which shape completion before autodiff applies too — and its scratch
// size, and run with pointers into the arena. Each kernel family file lists its ops in an OpEntry
// table; op_table() joins them. One virtual call per node per run; loops inside are templates.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graph/dtype.h"
#include "graph/node.h"
#include "graph/ops/shape_rules.h"

namespace amp {
class Communicator;  // backends/communicator.h
}

namespace amp::cpu {

// A tensor as a kernel sees it: element type, dims and where its bytes are.
struct View {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  void* data = nullptr;
  // The order of the elements in memory: 0, dense row-major, unless a kernel asked for another
  // (Kernel::layout_preferences) and the planner gave it; then a blocked layout of
  // backends/cpu/onednn_layout.h, a permutation of the same elements that elementwise kernels,
  // blind to the order, read and write alike.
  int layout = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  size_t rank() const { return dims.size(); }
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

struct RunContext {
  int threads = 1;
  uint64_t seed = 0;  // distinct per run and per node: random kernels draw from it
  Communicator* communicator = nullptr;  // the data-parallel processes (AllReduce); null: one process
};

struct KernelIO {
  std::vector<View*> in;   // nullptr for an absent optional input
  std::vector<View*> out;  // nullptr for an absent optional output
  void* workspace = nullptr;
  int threads = 1;  // what RunContext::threads will be: scratch sized per core may use it in infer()

  bool has_in(size_t i) const { return i < in.size() && in[i]; }
  bool has_out(size_t i) const { return i < out.size() && out[i]; }
  const View& input(size_t i) const { return *in.at(i); }
  View& output(size_t i) const { return *out.at(i); }
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Sets each present output's dtype and dims (an output's dtype arrives preset from the graph's
  // declared type where known, for ops whose output type is otherwise free); returns the scratch
  // bytes run() needs. Data is readable only for the op's shape inputs (OpEntry::shape_inputs).
  // Throws InputError for inputs the op cannot take. By default the op's shape rule and no
  // scratch; a kernel with scratch or checks of its own calls infer_outputs() first. (The
  // ai.onnx_amp gradient ops have no shape rule and set their outputs themselves.)
  virtual size_t infer(KernelIO& io) const {
    infer_outputs(io);
    return 0;
  }
  virtual void run(KernelIO& io, const RunContext& ctx) const = 0;

  // The operands (after infer()) this kernel reads or writes faster in a blocked layout, and that
  // layout: {is an output, operand index, layout}. The planner may give such an operand that
  // layout or another the kernel named anywhere (it then calls infer() again); every other
  // operand of every kernel stays dense row-major.
  struct LayoutWish {
    bool output;
    size_t index;
    int layout;
  };
  virtual std::vector<LayoutWish> layout_preferences(const KernelIO&) const { return {}; }

  // True when output 0 is input 0's bytes unchanged under other dims whenever both have the same
  // size (Reshape, Flatten, Squeeze, Unsqueeze, Identity; SumToShape summing nothing): the planner
  // may then make the output a view of the input's buffer and skip the launch
  // (CpuExecutable::build_plan says when; it checks the sizes).
  virtual bool aliases_input() const { return false; }

  // True for an op whose output dims follow only from running it (Loop: the trip count and the
  // carried values' shapes come out of its body; If: the branch taken): the planner treats every
  // input as a shape input (so their contents are known, and fed ones are part of the plan's
  // signature), calls infer() with them, which runs the op, and then run() once, keeping the
  // outputs as constants of the plan. run() always directly follows that infer().
  virtual bool runs_while_planning() const { return false; }

  // True for an op that draws random numbers on every run (RandomNormal, Bernoulli ...): the
  // planner never computes it once per plan, as it does nodes without inputs (Constant).
  virtual bool draws() const { return false; }

  // The input whose bytes output 0 may be written over, or -1: the kernel reads every element of
  // that input it needs before it writes any element of output 0 at or past that element's
  // offset (per row, say), and output 0 has that input's type and size. The planner then gives
  // output 0 the input's arena buffer when nothing reads the input afterwards
  // (CpuExecutable::build_plan says when): the loss gradient over GPT-2's logits, 393 MiB at
  // 2 x 1024 tokens in fp32, needs no buffer of its own.
  virtual int overwrites_input() const { return -1; }

  // Binds the op's shape rule to this node's attributes, when the op has one (make_kernel does).
  void bind_shape_rule(const Node& n, int64_t opset);

 protected:
  // Sets io's outputs by the op's shape rule. InputError when the inputs contradict it.
  void infer_outputs(KernelIO& io) const;

 private:
  const ShapeRule* rule_ = nullptr;
  ShapeFn shape_;
};

using KernelFactory = std::unique_ptr<Kernel> (*)(const Node& node, int64_t opset);

struct OpEntry {
  std::string_view op;
  KernelFactory make;
  uint32_t types;                // element types accepted for input 0 (bit 1 << DType)
  // Inputs whose values decide output shapes (Reshape's shape, ...): the shape rule's value inputs,
  // filled in by op_table() / find_amp_op() for ops with a rule; listed here for those without.
  std::vector<int> shape_inputs;
  bool reads_data = true;         // false when only the inputs' dims matter (Shape)
};

// Every op the CPU backend runs (domain ai.onnx), in family order.
const std::vector<OpEntry>& op_table();
const OpEntry* find_op(std::string_view op);

// The family tables op_table() joins, one per kernel file.
const std::vector<OpEntry>& elementwise_ops();
const std::vector<OpEntry>& cast_ops();
const std::vector<OpEntry>& float_class_ops();  // IsNaN, IsInf
const std::vector<OpEntry>& mean_ops();
const std::vector<OpEntry>& bit_shift_ops();
const std::vector<OpEntry>& random_ops();  // random.cc
const std::vector<OpEntry>& matmul_ops();
const std::vector<OpEntry>& conv_ops();
const std::vector<OpEntry>& conv_transpose_ops();
const std::vector<OpEntry>& pool_ops();
const std::vector<OpEntry>& norm_ops();
const std::vector<OpEntry>& softmax_ops();
const std::vector<OpEntry>& reduce_ops();
const std::vector<OpEntry>& arg_extremum_ops();  // ArgMax, ArgMin
const std::vector<OpEntry>& shape_ops();
const std::vector<OpEntry>& generator_ops();
const std::vector<OpEntry>& dropout_ops();
const std::vector<OpEntry>& loss_ops();
const std::vector<OpEntry>& pad_ops();
const std::vector<OpEntry>& resize_ops();
const std::vector<OpEntry>& scatter_nd_ops();
const std::vector<OpEntry>& einsum_ops();
// The ops third-party exporters' models brought (issue 31).
const std::vector<OpEntry>& quantize_ops();
const std::vector<OpEntry>& recurrent_ops();
const std::vector<OpEntry>& scan_ops();
const std::vector<OpEntry>& control_flow_ops();  // Loop, If
// Data movement and indexing (issue 31).
const std::vector<OpEntry>& tile_ops();
const std::vector<OpEntry>& cumsum_ops();
const std::vector<OpEntry>& gather_elements_ops();  // GatherElements, ScatterElements
const std::vector<OpEntry>& depth_to_space_ops();   // DepthToSpace, SpaceToDepth
const std::vector<OpEntry>& top_k_ops();
const std::vector<OpEntry>& gather_nd_ops();
const std::vector<OpEntry>& nonzero_ops();
const std::vector<OpEntry>& compress_ops();
const std::vector<OpEntry>& eye_like_ops();
const std::vector<OpEntry>& reverse_sequence_ops();
const std::vector<OpEntry>& hardmax_ops();
const std::vector<OpEntry>& non_max_suppression_ops();
const std::vector<OpEntry>& max_unpool_ops();
const std::vector<OpEntry>& unique_ops();
const std::vector<OpEntry>& roi_align_ops();
const std::vector<OpEntry>& grid_sample_ops();

// Factory helper: a kernel class constructed from (node, opset), with the op's shape rule.
template <class K>
std::unique_ptr<Kernel> make_kernel(const Node& node, int64_t opset) {
  auto k = std::make_unique<K>(node, opset);
  k->bind_shape_rule(node, opset);
  return k;
}

// e with its shape inputs taken from the op's shape rule, when it has one.
OpEntry with_shape_rule(OpEntry e, std::string_view domain);

}  // namespace amp::cpu
