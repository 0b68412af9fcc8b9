#include "backends/cpu/subgraph.h"

#include "backends/cpu/cpu_backend.h"
#include "graph/error.h"
#include "graph/subgraph_model.h"

namespace amp::cpu {

namespace {

// Bytes owned elsewhere (an arena buffer, a feed), viewed by a Tensor for the length of a call.
class BorrowedBuffer final : public Buffer {
 public:
  BorrowedBuffer(const void* data, size_t size) : data_(static_cast<const uint8_t*>(data)), size_(size) {}
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
};

}  // namespace

Tensor view_of(const View& v) {
  return Tensor::view(v.dtype, v.dims, std::make_shared<BorrowedBuffer>(v.data, v.nbytes()), 0);
}

CompiledSubgraph::CompiledSubgraph(const Node& n, const Graph& body, int64_t opset)
    : model_(subgraph_model(body, enclosing_reads(n), {{"", opset}})), own_inputs_(body.inputs().size()) {
  model_.path = "node " + n.label() + "'s subgraph '" + body.name + "'";
  for (const Value* v : enclosing_reads(n)) enclosing_initializer_.push_back(v->has_initializer());
  for (const Value* v : model_.graph->inputs()) input_names_.push_back(v->name());
  for (const Value* v : model_.graph->outputs()) output_names_.push_back(v->name());
  CompileOptions options;
  options.fuse_elementwise = false;  // bodies are small; fusion's grouping pass is not worth it per call
  exe_ = CpuBackend().compile(model_, options);
}

std::vector<Tensor> CompiledSubgraph::run(const std::vector<const View*>& own, const KernelIO& io,
                                          size_t first_outer) const {
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (size_t i = 0; i < own.size() && i < own_inputs_; ++i) feeds.emplace_back(input_names_[i], view_of(*own[i]));
  for (size_t i = own_inputs_; i < input_names_.size(); ++i) {
    const size_t k = first_outer + (i - own_inputs_);
    if (!io.has_in(k)) throw InputError(model_.path + ": the enclosing value '" + input_names_[i] + "' is absent");
    feeds.emplace_back(input_names_[i], view_of(io.input(k)));
  }
  return exe_->run(feeds, output_names_);
}

std::vector<Tensor> CompiledSubgraph::run(const std::vector<Tensor>& own, const KernelIO& io, size_t first_outer) const {
  std::vector<View> views;
  for (const Tensor& t : own) views.push_back(View{t.dtype, t.dims, const_cast<uint8_t*>(t.data())});
  std::vector<const View*> pointers;
  for (const View& v : views) pointers.push_back(&v);
  return run(pointers, io, first_outer);
}

}  // namespace amp::cpu
