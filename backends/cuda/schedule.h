// What the CUDA backend decides about a model without touching a device, so all of it is built and
// tested anywhere.
//
// At compile time: the numbered program; the CPU kernel of every step (the one implementation of
// the shape rules of every op, and the evaluator of host steps); which steps run on the host while
// a run is planned (constants, Shape and the arithmetic on shapes); the fixed device units —
// cuBLASLt products with the nodes their epilogues absorb, cuDNN convolutions with the residual
// Add and ReLU they absorb, FusedElementwise nodes, one op per other node from the CUDA op table —
// and the one-node program of every elementwise step.
//
// Per input-shape signature (plan()): every value's type and dims (and the bytes of those a unit
// stores packed, a ReLU mask as bits), host steps computed, and the elementwise steps grouped by
// their concrete shapes into fused kernels, and groups with one program batched into
// multi-tensor launches. Grouping waits for
// concrete shapes because training graphs carry few static ones (the passes that build them add
// values without shapes), and a group's outputs must agree in shape at run time.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/kernel.h"
#include "backends/cuda/cuda_op.h"
#include "backends/program.h"
#include "graph/ops/elementwise_grouping.h"

namespace amp::cuda {

struct Unit {
  std::vector<int> steps;       // program steps it covers
  std::vector<int> in, out;     // value numbers in the op's operand order, -1 when absent
  std::vector<bool> host_only;  // per input: the op reads it only while planning (a shape input)
  std::unique_ptr<CudaOp> op;
  std::string where;            // its first node, for errors
  std::string kind;             // "MatMul+Add", "fused Div+Erf+Add+Mul+Mul", "Softmax": for reports and tests
};

// Two fixed units a plan may run as one (loss_argmax_fusion.h): `unit`, made when the schedule is,
// replaces both in a plan's order where their operands allow.
struct MergedUnit {
  const Unit* first = nullptr;
  const Unit* second = nullptr;
  std::unique_ptr<Unit> unit;
};

// One signature's shapes and work, before any device memory exists.
struct ShapePlan {
  std::vector<int> steps;             // the steps the targets need, in program order
  std::vector<TensorDesc> desc;       // per value
  std::vector<const Tensor*> known;   // per value: contents known on the host, else null
  std::deque<Tensor> host_results;    // storage of what host steps computed
  std::vector<std::unique_ptr<Unit>> fused;  // this signature's elementwise groups
  std::vector<const Unit*> order;     // device units to run, in order
  // Units that move no byte for these shapes (CudaOp::aliases_input): their output shares the
  // buffer of alias_of[output], a value some unit, feed or constant writes, and nothing runs.
  std::vector<const Unit*> views;
  std::vector<int> alias_of;  // per value: the value whose bytes it is, or -1
  // Needed steps that compute nothing for these shapes because every reader reads past them: a
  // pass-through elementwise readers see through, a copy composed into its readers' copies, and
  // the views of such values. Out of `steps`; listed so reports place every node.
  std::vector<int> read_through;
  // This signature's copy units: chains of copies composed, copies batched (copy_fusion.h).
  std::vector<std::unique_ptr<Unit>> copies;
  // The units that compute channels-last, with the operands they take so (channels_last.h); the
  // layout each value is stored in is its desc's channels_last.
  std::unordered_map<const Unit*, ChannelsLastOperands> channels_last;
  int root(int v) const { return alias_of[v] >= 0 ? alias_of[v] : v; }
};

// Ops whose results differ per run although they may read no data (RandomNormal, Dropout ...):
// never evaluated on the host while planning.
bool is_random_op(std::string_view op);

// A unit's operand types, dims and host-known contents in a plan.
OpShapes unit_shapes(const ShapePlan& p, const Unit& u);

struct Schedule {
  // Throws InputError naming the node for anything the backend cannot run.
  Schedule(const Model& m, const CompileOptions& options);

  // fed: per value, the tensor fed for it (null when not fed). state_desc: per state tensor, its
  // current type and dims. targets: values that must be computed (fetches, state update sources).
  // InputError for a missing feed or shapes the ops reject.
  ShapePlan plan(const std::vector<const Tensor*>& fed, const std::vector<TensorDesc>& state_desc,
                 const std::vector<int>& targets) const;

  int state_index(const std::string& name) const;

  Program program;
  std::vector<std::unique_ptr<cpu::Kernel>> shape_kernels;         // per step, null for FusedElementwise nodes
  std::vector<const cpu::OpEntry*> entries;                        // per step, likewise
  std::vector<std::unique_ptr<ElementwiseProgram>> node_programs;  // per step: a FusedElementwise node's
  std::vector<std::unique_ptr<ProgramPart>> elementwise;  // per step: its one-node program, for plan-time fusion
  std::vector<std::vector<int>> readers;  // per value: the steps reading it
  std::vector<bool> shape_value;  // per value: planning needs its contents
  std::vector<std::vector<int>> read_on_host;  // per step: its shape inputs and CudaOpEntry::host_inputs
  std::vector<bool> host_step;    // per step: computed on the host while planning
  std::vector<bool> host_value;   // per value: its contents are known while planning
  std::vector<std::unique_ptr<Unit>> units;  // fixed device units
  std::vector<int> unit_of_step;             // per step: its fixed unit, or -1
  std::vector<MergedUnit> merged;            // pairs of them a plan may merge (loss_argmax_fusion.h)

  std::vector<int> state_values;             // value number of each state tensor, in order
  std::vector<int> state_of;                 // per value: index into state_values, or -1
  std::vector<std::pair<int, int>> updates;  // state index <- value
  bool channels_last = true;  // CompileOptions::channels_last

 private:
  void build_units(const Model& m, const std::vector<const Node*>& nodes);
  // Sizes the values units store in a layout of their own (CudaOp::packed_output_bytes) and
  // checks that every unit reading a value expects it stored as it is.
  void pack_values(ShapePlan& p) const;
  // Units that pass a value on unchanged for these shapes (a SumToShape over nothing, a Reshape to
  // the same dims: what choose_views makes views): elementwise steps read their input instead, so
  // the ops on either side fuse into one kernel (autodiff puts one between most gradient ops);
  // one left without readers is dropped from the plan. Returns, per value, the value it passes
  // on (past a chain of them, its first input), or -1.
  std::vector<int> bypass_pass_throughs(ShapePlan& p, std::vector<bool>& needed, const std::vector<int>& targets,
                                        const std::vector<const Tensor*>& fed) const;
  void group_elementwise(ShapePlan& p, const std::vector<bool>& needed, const std::vector<int>& targets,
                         const std::vector<int>& through) const;
  // Fused groups with one program whose inputs are all full-size or scalar, none waiting for
  // another, become one multi-tensor launch; such batches of different programs that do not wait
  // for each other share it, each group running its own program.
  void batch_fused_groups(ShapePlan& p) const;
  // Fused groups that compute single elements from single elements (a step's scalars: Adam's
  // bias corrections, the loss scale's update), none waiting for another, become one kernel.
  void merge_scalar_groups(ShapePlan& p) const;
  void order_units(ShapePlan& p) const;
  // Moves units that only reinterpret bytes from order to views, unless their input is state
  // that is not fed: the step's updates overwrite state, so a view of it could not be fetched.
  void choose_views(ShapePlan& p, const std::vector<const Tensor*>& fed) const;
  std::vector<const Unit*> plan_units(const ShapePlan& p) const;
  std::vector<std::vector<size_t>> unit_dependencies(const std::vector<const Unit*>& all) const;
  std::vector<size_t> topological(const std::vector<const Unit*>& all, const std::vector<std::vector<size_t>>& deps) const;
};

}  // namespace amp::cuda
