// amp-train MODEL --data TRAIN [--val VAL] ...: trains an ONNX model (or a training step saved by
// --save-training-graph) in fp32 or mixed precision and writes the trained model. Exit codes: 0,
// 2 for bad input (model, data, flags, a loss that stays non-finite), 1 for internal failures.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>

#include "frontends/lib/data_parallel.h"
#include "frontends/lib/tool_main.h"
#include "frontends/lib/train_flags.h"
#include "frontends/lib/trainer.h"
#include "frontends/lib/training_plot.h"
#include "graph/error.h"

namespace amp {

namespace {

std::string mib(size_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)); }

// --memory-report: where the peak goes (MemoryReport says how each part is counted).
void print_memory_report(const char* label, const TrainResult& r) {
  const MemoryReport& m = r.memory;
  std::printf("%s memory:\n", label);
  auto line = [](const char* what, size_t bytes) { std::printf("  %-44s %12s\n", what, mib(bytes).c_str()); };
  line("weights (fp32 state)", m.weights);
  line("optimizer state", m.optimizer_state);
  line("arena", m.arena);
  line("  low-precision weight copies (at its peak)", m.low_precision_weights);
  line("  gradients and backward temporaries (peak)", m.gradients);
  line("  activations (at its peak)", m.activations);
  line("  kernel scratch (at its peak)", m.scratch);
  line("  unused at its peak", m.arena_unused_at_peak);
  line("constants (initializers not state, planned)", m.constants);
  if (m.validation) line("validation model (state + arena)", m.validation);
  line("everything else (peak RSS - the above)", m.other);
  line("peak RSS", m.peak_rss);
  std::printf("  the largest buffers at the arena's peak:\n");
  for (const auto& [what, bytes] : m.largest) std::printf("    %-70s %12s\n", what.c_str(), mib(bytes).c_str());
}

void print_summary(const char* label, const TrainResult& r) {
  std::printf("%s: %lld steps (%lld skipped), final loss %.6f, %.2f ms/step (the first %.2f s: it plans the step), "
              "%.0f samples/s, peak memory %s (backend state + arena %s)\n",
              label, static_cast<long long>(r.steps), static_cast<long long>(r.skipped), r.final_loss,
              r.seconds_per_step * 1e3, r.first_step_seconds, r.samples_per_second, mib(r.peak_rss_bytes).c_str(),
              mib(r.backend_peak_bytes).c_str());
  if (r.val_loss >= 0)
    std::printf("%s: val_loss %.6f%s\n", label, r.val_loss,
                r.val_accuracy >= 0 ? fmt::format(" val_accuracy {:.4f}", r.val_accuracy).c_str() : "");
}

// --plot, or with --compare-fp32 beside the metrics (m.jsonl -> m.svg); "" for none. Its folder is
// checked before training, so a typo does not cost a run.
std::string plot_path(const TrainOptions& o, const TrainFlags& f) {
  std::filesystem::path path = f.plot;
  if (path.empty() && f.compare_fp32 && !o.metrics.empty())
    path = std::filesystem::path(o.metrics).replace_extension(".svg");
  if (path.empty()) return "";
  const auto dir = std::filesystem::absolute(path).parent_path();
  if (!std::filesystem::is_directory(dir))
    throw InputError(path.string() + ": no such directory '" + dir.string() + "'");
  return path.string();
}

std::string precision_text(const std::string& dtype) { return dtype == "fp32" ? "fp32" : dtype + " mixed precision"; }

void write_plot(const std::string& path, const TrainOptions& o, const std::vector<PlottedRun>& runs,
                const std::string& what) {
  if (path.empty()) return;
  write_chart_svg(training_chart(std::filesystem::path(o.model).filename().string() + ": " + what, runs), path);
  spdlog::info("loss curves drawn in {}", path);
}

int run(TrainOptions o, const TrainFlags& f) {
  o = apply_train_flags(std::move(o), f);
  const std::string plot = plot_path(o, f);
  if (!f.compare_fp32) {
    const TrainResult r = train(o);
    if (!r.root) return kExitOk;
    print_summary("train", r);
    if (f.memory_report) print_memory_report("train", r);
    write_plot(plot, o, {{f.dtype, r}}, precision_text(f.dtype));
    return kExitOk;
  }
  // The same steps in fp32 first (no side outputs), then as asked.
  TrainOptions fp32 = o;
  fp32.spec.precision = DType::kFloat;
  fp32.spec.loss_scale.mode = LossScaleSpec::Mode::kNone;
  fp32.save = fp32.checkpoint = fp32.metrics = fp32.save_training_graph = "";
  fp32.label = "fp32";
  o.label = f.dtype;
  const TrainResult a = train(fp32);
  const TrainResult b = train(o);
  if (!b.root) return kExitOk;
  std::printf("%-14s %14s %14s\n", "", "fp32", f.dtype.c_str());
  std::printf("%-14s %14.3f %14.3f\n", "ms/step", a.seconds_per_step * 1e3, b.seconds_per_step * 1e3);
  std::printf("%-14s %14.3f %14.3f\n", "first step s", a.first_step_seconds, b.first_step_seconds);
  std::printf("%-14s %14.0f %14.0f\n", "samples/s", a.samples_per_second, b.samples_per_second);
  std::printf("%-14s %14s %14s\n", "peak memory", mib(a.peak_rss_bytes).c_str(), mib(b.peak_rss_bytes).c_str());
  std::printf("%-14s %14s %14s\n", "backend bytes", mib(a.backend_peak_bytes).c_str(), mib(b.backend_peak_bytes).c_str());
  std::printf("%-14s %14.6f %14.6f\n", "final loss", a.final_loss, b.final_loss);
  std::printf("%-14s %14lld %14lld\n", "skipped steps", static_cast<long long>(a.skipped), static_cast<long long>(b.skipped));
  if (a.val_accuracy >= 0) std::printf("%-14s %14.4f %14.4f\n", "val accuracy", a.val_accuracy, b.val_accuracy);
  if (f.memory_report) {
    print_memory_report("fp32", a);
    print_memory_report(f.dtype.c_str(), b);
  }
  write_plot(plot, o, {{"fp32", a}, {f.dtype, b}}, "fp32 vs " + precision_text(f.dtype));
  return kExitOk;
}

}  // namespace

}  // namespace amp

int main(int argc, char** argv) {
  CLI::App app{"Train an ONNX model in fp32 or mixed precision (fp16/bf16 over fp32 master weights).", "amp-train"};
  amp::TrainOptions o;
  amp::TrainFlags f;
  app.add_option("model", o.model, "the .onnx model (a training-mode export), or a step saved with --save-training-graph")
      ->required();
  app.add_option("--data", o.data, "training data: .npz (keys = graph inputs + labels), IDX[.gz][,LABELS] or .csv")
      ->required();
  app.add_option("--val", o.val, "validation data, same formats; evaluated after every epoch");
  app.add_option("--loss", f.loss, "append a loss: cross_entropy, mse or bce_with_logits (default: the model's own scalar output)");
  app.add_option("--target", o.spec.loss.target, "the model output the loss reads (default: the only output)");
  app.add_option("--labels", o.spec.loss.labels, "data key of the labels (default: labels)");
  auto* epochs = app.add_option("--epochs", o.epochs, "passes over the training data (default: 1 epoch)")
                     ->check(CLI::PositiveNumber);
  app.add_option("--steps", o.steps, "optimizer steps in total (a resumed run counts the checkpoint's)")
      ->excludes(epochs)
      ->check(CLI::PositiveNumber);
  app.add_option("--batch-size", o.batch_size, "samples per micro-batch (default 32)");
  app.add_option("--optimizer", f.optimizer, "sgd, adam or adamw (default sgd)");
  app.add_option("--lr", f.lr, "learning rate (default 0.01)");
  app.add_option("--momentum", f.momentum, "SGD momentum");
  app.add_flag("--nesterov", f.nesterov, "Nesterov momentum (SGD)");
  app.add_option("--weight-decay", f.weight_decay, "L2 (sgd, adam) or decoupled (adamw) weight decay");
  app.add_option("--schedule", f.schedule, "learning-rate schedule: constant, cosine or linear");
  app.add_option("--warmup", o.schedule.warmup, "linear warm-up steps");
  app.add_option("--clip-norm", f.clip_norm, "clip the global gradient L2 norm to this value");
  app.add_option("--accumulate", o.spec.accumulate, "micro-batches per optimizer step (default 1)");
  app.add_option("--dtype", f.dtype, "fp32, fp16 or bf16 (forward and backward; weights stay fp32)");
  app.add_option("--loss-scale", f.loss_scale, "'dynamic' or a static scale (default: dynamic for fp16, none otherwise)");
  app.add_flag("--strict-data", o.strict_data, "refuse data holding NaN or inf (default: a warning naming the first sample)");
  app.add_option("--max-skipped-steps", o.max_skipped_steps,
                 "stop when this many steps in a row are skipped for non-finite gradients (default 50; 0: never)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--freeze", o.spec.freeze, "regular expression of parameter names not to train");
  app.add_option("--device", o.device, "cpu, cuda or auto")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--threads", o.threads, "CPU threads (0: all cores)");
  app.add_flag("--tf32", o.tf32,
               "let fp32 products and convolutions use TF32 Tensor Cores (cuda; 10-bit mantissa in the products, "
               "fp32 sums, as PyTorch's allow_tf32); the CPU computes fp32 either way");
  app.add_option("--seed", o.seed, "seed for shuffling and dropout (same seed, same result)");
  app.add_flag("--no-shuffle", f.no_shuffle, "keep the data's order");
  app.add_option("--save", o.save, "write the trained model (inference mode) here");
  app.add_option("--checkpoint", o.checkpoint, "folder for checkpoints (written after every epoch and at the end)");
  app.add_option("--resume", o.resume, "continue from the checkpoint in this folder");
  app.add_option("--metrics", o.metrics, "JSON lines: one per optimizer step (loss, lr, loss scale, skipped, samples/s; on a GPU device_ms, what the device worked of the step) and one per validation pass");
  app.add_option("--save-training-graph", o.save_training_graph,
                 "write the training step as ONNX (inference graph + training_info)");
  app.add_flag("--compare-fp32", f.compare_fp32,
               "train the same steps in fp32 too and print both side by side (drawn beside --metrics as .svg)");
  app.add_flag("--memory-report", f.memory_report,
               "print where the peak memory goes: weights, optimizer state, the arena (low-precision weight copies, "
               "gradients, activations, scratch at its peak), everything else (also the last --metrics record)");
  app.add_option("--calibrate", o.calibrate,
                 "an .npz of forward inputs (other keys, such as labels, are ignored): keep in fp32 the fewest "
                 "forward nodes, cheapest first, that bring every output within --max-error on them (as "
                 "amp-rewrite --calibrate; measured in eval mode)");
  app.add_option("--max-error", o.calibrate_max_error,
                 "with --calibrate: largest error allowed per output, relative to max |fp32|; default: twice the "
                 "floor (the error with only inputs and weights at 16-bit precision)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--plot", f.plot, "draw the loss curves, validation, loss scale and skipped steps here (.svg)");
  app.add_option("--bucket-mb", f.bucket_mb,
                 "data-parallel runs (mpirun -np N amp-train ...): MiB of gradients per all-reduce (default 25, as "
                 "PyTorch DDP's bucket_cap_mb)");
  return amp::tool_main(app, argc, argv, [&] {
    // Under mpirun or srun, one of several processes: each trains a replica on its share of the data.
    o.communicator = amp::join_launched_processes();
    return amp::run_as_rank("amp-train", o.communicator, [&] { return amp::run(o, f); });
  });
}
