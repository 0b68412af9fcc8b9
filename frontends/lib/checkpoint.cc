#include "frontends/lib/checkpoint.h"

#include <cstring>
#include <filesystem>

#include "frontends/lib/npz.h"
#include "graph/error.h"

namespace amp {

namespace {

// The position travels as a uint8 array of JSON text under a key no graph value can have.
constexpr char kPositionKey[] = "__position__";

std::string file_in(const std::string& dir) { return (std::filesystem::path(dir) / "checkpoint.npz").string(); }

}  // namespace

void write_checkpoint(const std::string& dir, const Checkpoint& c) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError(dir + ": cannot create the checkpoint folder: " + ec.message());
  std::vector<std::pair<std::string, Tensor>> arrays = c.state;
  const std::string text = c.position.dump();
  Tensor meta(DType::kUInt8, {static_cast<int64_t>(text.size())});
  std::memcpy(meta.mutable_data(), text.data(), text.size());
  arrays.emplace_back(kPositionKey, std::move(meta));
  write_npz(file_in(dir), arrays, /*compress=*/false);
}

Checkpoint read_checkpoint(const std::string& dir) {
  const std::string path = file_in(dir);
  if (!std::filesystem::exists(path)) throw InputError(path + ": no checkpoint to resume from");
  Checkpoint c;
  bool found = false;
  for (auto& [key, t] : read_npz(path)) {
    if (key == kPositionKey) {
      try {
        c.position = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(t.data()), t.nbytes()));
      } catch (const std::exception& e) {
        throw InputError(path + ": the checkpoint's position record is damaged: " + e.what());
      }
      found = true;
    } else {
      c.state.emplace_back(key, std::move(t));
    }
  }
  if (!found) throw InputError(path + ": not an amp-train checkpoint (no position record)");
  return c;
}

}  // namespace amp
