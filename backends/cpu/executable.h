// A compiled model on the CPU. Compile numbers the graph, makes one kernel per node and copies the
// state in; the first run with a new input-shape signature plans it: every value's type and dims,
// the values shapes depend on computed right then (Shape -> Gather -> Concat -> Reshape chains),
// and one arena laid out by liveness for everything else. Later runs with the same signature only
// point the feed views at the new data and call the kernels in order.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/op_profile.h"
#include "backends/program.h"

namespace amp::cpu {

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(const Model& m, const CompileOptions& options, const Backend& backend);
  ~CpuExecutable() override;

  std::vector<Tensor> run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                          const std::vector<std::string>& fetches) override;
  std::vector<std::string> state_names() const override;
  Tensor read_state(const std::string& name) const override;
  void write_state(const std::string& name, const Tensor& value) override;
  MemoryStats memory() const override;
  void trim() override;
  // The state kept in a blocked layout now (CompileOptions::native_weight_layouts), by name.
  std::vector<std::string> blocked_state() const;

 private:
  struct Plan;
  std::unique_ptr<Plan> build_plan(const std::vector<const Tensor*>& fed, const std::vector<int>& fetches) const;
  int state_index(const std::string& name) const;
  // Gives blocked layouts (View::layout) to the values of a plan that may keep one (see
  // CompileOptions::native_weight_layouts); returns each state's layout in it.
  std::vector<int> assign_layouts(Plan& plan, const std::vector<const Tensor*>& fed,
                                  const std::vector<bool>& made_at_plan) const;
  // Puts state s in `layout` (View::layout), converting its bytes.
  void set_state_layout(size_t s, int layout);

  // How a step treats the order of its operands' elements (View::layout): dense only (unless the
  // kernel asks for a blocked layout), blind to it (elementwise), reading any order (AllFinite),
  // or input i+1 and output i alike (AllReduce).
  enum class LayoutRole : uint8_t { kDense, kElementwise, kAnyInputs, kPairwise };

  Program program_;
  std::vector<int> seed_index_;  // per step: its index before elementwise fusion, which random ops draw by
  std::vector<std::string> profile_names_;  // per step: its op, or a fused step's ops ("Add+Relu")
  std::vector<bool> fused_away_;            // per value: computed inside a fused kernel, not kept
  std::vector<std::unique_ptr<Kernel>> kernels_;  // per step
  std::vector<const OpEntry*> entries_;           // per step
  std::vector<bool> shape_value_;                 // per value: planning must know its contents
  std::vector<int> state_of_;                     // per value: index into state_, or -1
  std::vector<Tensor> state_;  // updated state is private so its bytes stay put; the rest may share the model's
  std::vector<std::pair<int, int>> updates_;      // state index <- value
  std::vector<LayoutRole> layout_role_;           // per step
  std::vector<int> state_layout_;                 // per state: the layout its bytes are in now
  bool native_layouts_ = true;                    // CompileOptions::native_weight_layouts
  std::map<std::string, std::unique_ptr<Plan>> plans_;
  const Plan* last_plan_ = nullptr;
  std::shared_ptr<Communicator> communicator_;
  uint64_t seed_ = 0;
  uint64_t runs_ = 0;
  int threads_ = 1;
  OpProfile profile_;  // AMP_PROFILE=1: time per op type, printed when destroyed
};

}  // namespace amp::cpu
