#include "frontends/lib/data_parallel.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>
#include <string_view>

#include "frontends/lib/npz.h"
#include "frontends/lib/tool_main.h"

namespace amp {

std::string DataParallel::who() const {
  if (!comm_) return "rank 0 of 1";
  return "rank " + std::to_string(comm_->rank()) + " of " + std::to_string(comm_->size()) + " on " + comm_->host();
}

std::vector<int64_t> DataParallel::shard(const std::vector<int64_t>& order) const {
  const auto n = static_cast<int64_t>(order.size());
  const int64_t per_rank = shard_size(n), ranks = size();
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank));
  for (int64_t k = 0; k < per_rank; ++k) {
    const int64_t at = k * ranks + rank();
    mine.push_back(order[static_cast<size_t>(at % n)]);  // past the end: the padding repeats the start
  }
  return mine;
}

std::vector<int64_t> DataParallel::validation_rows(int64_t n) const {
  std::vector<int64_t> rows;
  for (int64_t i = rank(); i < n; i += size()) rows.push_back(i);
  return rows;
}

void DataParallel::sum(std::vector<double>& values) const {
  if (comm_ && comm_->size() > 1 && !values.empty()) comm_->sum(values.data(), values.size());
}

void DataParallel::check_started_alike(const nlohmann::json& settings) const {
  if (!comm_ || comm_->size() == 1) return;
  const std::vector<std::string> all = comm_->all_gather(settings.dump());
  const nlohmann::json first = nlohmann::json::parse(all[0]);
  for (size_t r = 1; r < all.size(); ++r) {
    const nlohmann::json other = nlohmann::json::parse(all[r]);
    nlohmann::json keys = first;
    keys.update(other);  // every key either has, in order
    for (const auto& [key, unused] : keys.items()) {
      const nlohmann::json a = first.value(key, nlohmann::json()), b = other.value(key, nlohmann::json());
      if (a == b) continue;
      auto text = [](const nlohmann::json& v) { return v.is_null() ? std::string("unset") : v.dump(); };
      throw CollectiveError("the processes were started differently: " + key + " is " + text(b) + " on rank " +
                            std::to_string(r) + " but " + text(a) + " on rank 0; every rank must train the same "
                            "model on the same data with the same options");
    }
  }
}

void DataParallel::check_same_state(const std::vector<std::pair<std::string, Tensor>>& state) const {
  if (!comm_ || comm_->size() == 1) return;
  std::string mine;
  for (const auto& [name, t] : state) mine += name + "=" + std::to_string(digest(t.data(), t.nbytes())) + "\n";
  const std::vector<std::string> all = comm_->all_gather(mine);
  for (size_t r = 1; r < all.size(); ++r) {
    std::istringstream ours(all[0]), theirs(all[r]);
    std::string a, b;
    while (std::getline(ours, a) && std::getline(theirs, b))
      if (a != b)
        throw Error("the replicas diverged: state '" + a.substr(0, a.find('=')) + "' on rank " + std::to_string(r) +
                    " differs from rank 0's");
  }
}

RankLog::RankLog(const DataParallel& dp) {
  const char* dir = std::getenv("AMP_TRAIN_RANK_DIR");
  if (!dir || !*dir) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  prefix_ = (std::filesystem::path(dir) / ("rank" + std::to_string(dp.rank()))).string();
  steps_ = MetricsLog(prefix_ + ".jsonl", false);
}

void RankLog::step(const nlohmann::json& record) {
  if (!prefix_.empty()) steps_.write(record);
}

void RankLog::state(const std::vector<std::pair<std::string, Tensor>>& state) const {
  if (!prefix_.empty()) write_npz(prefix_ + ".state.npz", state, /*compress=*/false);
}

uint64_t digest(const void* data, size_t bytes) {
  return std::hash<std::string_view>{}(std::string_view(static_cast<const char*>(data), bytes));
}

uint64_t file_digest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot read");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return digest(bytes.data(), bytes.size());
}

namespace {

[[noreturn]] void end_all(const std::string& tool, const std::shared_ptr<Communicator>& comm, int code,
                          const std::string& what) {
  std::fprintf(stderr, "%s: error: %s: %s\n", tool.c_str(), DataParallel(comm).who().c_str(), what.c_str());
  std::fflush(stderr);
  comm->abort(code);
  std::_Exit(code);  // not reached: the compiler does not see [[noreturn]] through the virtual call
}

}  // namespace

int run_as_rank(const std::string& tool, const std::shared_ptr<Communicator>& comm, const std::function<int()>& body) {
  if (!comm || comm->size() == 1) return body();  // tool_main reports errors as for any command
  try {
    return body();
  } catch (const CollectiveError& e) {
    if (comm->rank() == 0) std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), e.what());
    return kExitBadInput;
  } catch (const InputError& e) {
    end_all(tool, comm, kExitBadInput, e.what());
  } catch (const std::bad_alloc&) {
    end_all(tool, comm, kExitInternal, "out of memory");
  } catch (const std::exception& e) {
    end_all(tool, comm, kExitInternal, std::string("internal error: ") + e.what());
  }
}

}  // namespace amp
