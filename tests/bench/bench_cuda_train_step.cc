// One optimizer step of the demo models on the CUDA backend, the C++ side of
// tests/bench/bench_gpu_train.py: the training step graph amp-train builds (AdamW, cross entropy;
// fp16 with a dynamic loss scale, bf16 without, or fp32), compiled once, fed in-memory batches of
// the sizes the PyTorch script uses, timed after warm-up — so after CUDA Graph capture, the
// steady state of a training loop. Counters: samples/s, device memory of the plan (arena and
// scratch) and of the state (fp32 masters, moments, loss scale). The `_nccl1` variants are the
// data-parallel step (gradients averaged by AllReduce nodes) over NCCL at world size 1: what the
// collectives, their stream and their joins cost beside the same step without them.
//
// --zoo DIR adds the training exports DIR/*/bench.onnx (tests/zoo/gpu_zoo.py prepare: torchvision
// models exported for training at batch 32) as BM_ZooStep/NAME_{fp32,fp16,bf16}, at the export's
// batch and image size, with SGD (momentum 0.9, lr 0.01) as the zoo harness trains.
//
//   build/bench_cuda_train_step [--benchmark_filter=gpt] [--benchmark_format=json] [--zoo DIR]
//
// Without a usable GPU every benchmark reports the CUDA runtime's reason and is skipped.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "backends/backend.h"
#include "graph/error.h"
#include "graph/onnx_io.h"
#include "passes/training/training_step.h"
#include "tests/support/thread_communicator.h"

namespace {

std::string model_path(const std::string& name) {
  const char* env = std::getenv("AMP_SOURCE_DIR");
  const std::filesystem::path root =
      env && *env ? std::filesystem::path(env) : std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
  return (root / "models" / (name + ".train.onnx")).string();
}

amp::Tensor random_tensor(amp::DType t, std::vector<int64_t> dims, int64_t classes) {
  amp::Tensor x(t, std::move(dims));
  std::mt19937 gen(1);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (t == amp::DType::kInt64) x.mutable_as<int64_t>()[i] = static_cast<int64_t>(gen() % classes);
    else x.mutable_as<float>()[i] = static_cast<float>(gen() % 1000) / 1000.0f;
  }
  return x;
}

// A model to train and its feeds: the demo models by name (models/NAME.train.onnx), or a zoo export.
struct BenchModel {
  std::string name, path;
  bool zoo = false;
};

// One training step of `model` at `batch` samples (a zoo export's own batch: the argument is unused).
void BM_TrainStep(benchmark::State& state, const BenchModel& model, amp::DType precision, int64_t batch,
                  bool data_parallel) {
  std::unique_ptr<amp::Backend> backend;
  try {
    backend = amp::make_backend("cuda");
  } catch (const amp::InputError& e) {
    state.SkipWithError(e.what());
    for (auto _ : state) {
    }
    return;
  }
  amp::TrainingSpec spec;
  spec.loss.kind = amp::LossKind::kCrossEntropy;
  if (model.zoo) {
    spec.optimizer.kind = amp::OptimizerSpec::Kind::kSgd;
    spec.optimizer.momentum = 0.9f;
  } else {
    spec.optimizer.kind = amp::OptimizerSpec::Kind::kAdamW;
    spec.optimizer.weight_decay = 0.01f;
  }
  spec.precision = precision;
  spec.check_finite = precision != amp::DType::kFloat;
  if (precision == amp::DType::kFloat16) spec.loss_scale.mode = amp::LossScaleSpec::Mode::kDynamic;
  spec.data_parallel.enabled = data_parallel;
  amp::Model loaded = amp::load_model(model.zoo ? model.path : model_path(model.name));
  // The zoo exports' one image input: its dims after the batch.
  std::vector<int64_t> image{1, 28, 28};
  std::string input = "input";
  if (model.zoo) {
    const amp::Value* in = loaded.graph->inputs().at(0);
    const auto& type = in->type();
    if (type.elem != amp::DType::kFloat || !type.shape || !type.shape->is_static() || type.shape->rank() < 2) {
      state.SkipWithError((model.path + ": the zoo benchmark feeds float images of static dims; input '" + in->name() +
                           "' is " + type.str())
                              .c_str());
      for (auto _ : state) {
      }
      return;
    }
    input = in->name();
    image.clear();
    const auto& dims = type.shape->dims;
    batch = *dims[0].value;
    for (size_t i = 1; i < dims.size(); ++i) image.push_back(*dims[i].value);
  }
  amp::TrainingStep step = amp::build_training_step(std::move(loaded), spec);
  amp::CompileOptions options;
  options.state = step.state;
  options.state_updates = step.updates;
  if (data_parallel) options.communicator = amp::test::thread_ranks(1)[0];
  auto exe = backend->compile(step.model, options);

  // gpt: [batch, 32] tokens over a 64-symbol vocabulary, labels the next tokens; images otherwise.
  std::vector<std::pair<std::string, amp::Tensor>> feeds;
  const bool gpt = model.name == "gpt";
  std::vector<int64_t> images{batch};
  images.insert(images.end(), image.begin(), image.end());
  feeds.push_back(gpt ? std::make_pair(std::string("tokens"), random_tensor(amp::DType::kInt64, {batch, 32}, 64))
                      : std::make_pair(input, random_tensor(amp::DType::kFloat, images, 0)));
  feeds.push_back({step.labels, gpt ? random_tensor(amp::DType::kInt64, {batch, 32}, 64)
                                    : random_tensor(amp::DType::kInt64, {batch}, 10)});
  amp::Tensor lr(amp::DType::kFloat, {});
  lr.mutable_as<float>()[0] = model.zoo ? 1e-2f : 1e-3f;
  feeds.push_back({step.lr, lr});
  for (int warm = 0; warm < 5; ++warm) exe->run(feeds, {step.loss});  // plan, compile kernels, capture the graph
  for (auto _ : state) benchmark::DoNotOptimize(exe->run(feeds, {step.loss}));
  const amp::MemoryStats mem = exe->memory();
  state.counters["batch"] = static_cast<double>(batch);
  state.counters["tokens"] = static_cast<double>(gpt ? batch * 32 : 0);
  state.counters["arena_MiB"] = static_cast<double>(mem.arena_bytes) / (1 << 20);
  state.counters["state_MiB"] = static_cast<double>(mem.state_bytes) / (1 << 20);
  state.counters["samples/s"] = benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
}

const std::pair<const char*, amp::DType> kPrecisions[] = {
    {"fp32", amp::DType::kFloat}, {"fp16", amp::DType::kFloat16}, {"bf16", amp::DType::kBFloat16}};

void register_all() {
  const std::pair<const char*, int64_t> models[] = {{"mlp", 256}, {"cnn", 128}, {"gpt", 16}};
  for (const auto& [model, batch] : models)
    for (const auto& [tag, precision] : kPrecisions)
      for (bool data_parallel : {false, true}) {
        if (data_parallel && precision != amp::DType::kFloat16) continue;
        benchmark::RegisterBenchmark(
            (std::string("BM_TrainStep/") + model + "_" + tag + (data_parallel ? "_nccl1" : "")).c_str(), BM_TrainStep,
            BenchModel{model, "", false}, precision, batch, data_parallel)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
}

// Every DIR/NAME/bench.onnx, sorted by name; the batch is the export's (BM_TrainStep reads it).
void register_zoo(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (std::filesystem::exists(entry.path() / "bench.onnx")) found.push_back(entry.path());
  std::sort(found.begin(), found.end());
  for (const auto& d : found)
    for (const auto& [tag, precision] : kPrecisions)
      benchmark::RegisterBenchmark((std::string("BM_ZooStep/") + d.filename().string() + "_" + tag).c_str(),
                                   BM_TrainStep, BenchModel{d.filename().string(), (d / "bench.onnx").string(), true},
                                   precision, 0, false)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
  // --zoo DIR is ours: taken out before Google Benchmark reads the rest.
  std::string zoo;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--zoo" && i + 1 < argc) {
      zoo = argv[++i];
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  register_all();
  if (!zoo.empty()) {
    if (!std::filesystem::is_directory(zoo)) {
      std::fprintf(stderr, "bench_cuda_train_step: --zoo %s: no such folder\n", zoo.c_str());
      return 2;
    }
    register_zoo(zoo);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
