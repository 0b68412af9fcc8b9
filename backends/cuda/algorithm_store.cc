#include "backends/cuda/algorithm_store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>

namespace amp::cuda {

// A line is "CHOICE<TAB>KEY": the key (direction and shape) has spaces, the choice none. A choice
// is an algorithm and its math type (convolution_ops.cc's remembered_choice), below 64; anything
// else is not a line this store wrote.
AlgorithmStore::AlgorithmStore(const std::string& folder, const std::string& versions)
    : header_("onnx-amp convolution algorithms for " + versions) {
  if (folder.empty()) return;
  std::string name;
  for (char c : versions) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  file_ = folder + "/convolution-algorithms-" + name + ".txt";
  std::ifstream in(file_);
  std::string line;
  if (!in || !std::getline(in, line) || line != header_) return;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab == 0 || tab == std::string::npos || tab + 1 == line.size()) continue;
    int algo = -1;
    try {
      size_t used = 0;
      algo = std::stoi(line.substr(0, tab), &used);
      if (used != tab) continue;
    } catch (const std::exception&) {
      continue;
    }
    if (algo < 0 || algo >= 64) continue;
    choices_[line.substr(tab + 1)] = algo;  // a later line for the key wins: the algorithm that ran last
    ++read_;
  }
}

std::optional<int> AlgorithmStore::find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = choices_.find(key);
  if (it == choices_.end()) return std::nullopt;
  return it->second;
}

void AlgorithmStore::remember(const std::string& key, int algo) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = choices_.find(key);
  if (it != choices_.end() && it->second == algo) return;
  choices_[key] = algo;
  if (file_.empty() || key.find('\n') != std::string::npos) return;
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(file_).parent_path(), error);
  // O_APPEND with one write per line: processes sharing the folder interleave whole lines.
  const int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  std::string text;
  if (fd >= 0 && ::lseek(fd, 0, SEEK_END) == 0) text = header_ + "\n";
  text += std::to_string(algo) + "\t" + key + "\n";
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    spdlog::warn("algorithm cache: cannot write {}; convolution algorithms are measured again in the next process",
                 file_);
    file_.clear();
  }
  if (fd >= 0) ::close(fd);
}

}  // namespace amp::cuda
