#include "frontends/lib/training_data.h"

#include <spdlog/spdlog.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "frontends/lib/non_finite.h"
#include "frontends/lib/npz.h"
#include "graph/error.h"

namespace amp {

const Tensor* DataSet::find(const std::string& key) const {
  for (const auto& [k, t] : arrays)
    if (k == key) return &t;
  return nullptr;
}

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The whole file, inflated when it is gzip (zlib reads plain files unchanged).
std::string read_maybe_gzipped(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw InputError(path + ": cannot open");
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  const bool failed = n < 0;
  gzclose(f);
  if (failed) throw InputError(path + ": not a readable gzip or IDX file");
  return out;
}

uint32_t big_endian32(const std::string& s, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data() + at);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// IDX: magic 0x0000 <type> <rank>, then rank big-endian uint32 dims, then the data (uint8 here).
Tensor read_idx(const std::string& path) {
  const std::string bytes = read_maybe_gzipped(path);
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0) throw InputError(path + ": not an IDX file (bad magic)");
  if (static_cast<unsigned char>(bytes[2]) != 0x08)
    throw InputError(path + ": only unsigned-byte IDX data is supported (type 0x08)");
  const size_t rank = static_cast<unsigned char>(bytes[3]);
  if (rank == 0 || bytes.size() < 4 + 4 * rank) throw InputError(path + ": truncated IDX header");
  std::vector<int64_t> dims;
  for (size_t i = 0; i < rank; ++i) dims.push_back(big_endian32(bytes, 4 + 4 * i));
  Tensor t(DType::kUInt8, dims);
  const size_t header = 4 + 4 * rank;
  if (bytes.size() - header != t.nbytes())
    throw InputError(path + ": IDX data has " + std::to_string(bytes.size() - header) + " bytes, its dims need " +
                     std::to_string(t.nbytes()));
  std::memcpy(t.mutable_data(), bytes.data() + header, t.nbytes());
  return t;
}

DataSet load_idx(const std::string& spec, const std::string& input_key, const std::string& labels_key) {
  std::string images = spec, labels;
  if (size_t comma = spec.find(','); comma != std::string::npos) {
    images = spec.substr(0, comma);
    labels = spec.substr(comma + 1);
  } else {
    size_t at = images.find("images-idx3");
    if (at == std::string::npos)
      throw InputError(spec + ": name the labels file too: --data IMAGES,LABELS");
    labels = images;
    labels.replace(at, std::string("images-idx3").size(), "labels-idx1");
  }
  Tensor raw = read_idx(images);
  Tensor raw_labels = read_idx(labels);
  if (raw.dims.size() < 2 || raw_labels.dims.size() != 1 || raw_labels.dims[0] != raw.dims[0])
    throw InputError(images + ", " + labels + ": images and labels do not pair up (" + std::to_string(raw.dims[0]) +
                     " images, labels of shape [" + std::to_string(raw_labels.dims[0]) + "])");
  // [N, H, W] bytes -> [N, 1, H, W] floats in [0, 1]: torchvision's ToTensor().
  std::vector<int64_t> dims = raw.dims;
  dims.insert(dims.begin() + 1, 1);
  Tensor x(DType::kFloat, dims);
  for (int64_t i = 0; i < raw.numel(); ++i) x.mutable_as<float>()[i] = raw.as<uint8_t>()[i] / 255.0f;
  Tensor y(DType::kInt64, raw_labels.dims);
  for (int64_t i = 0; i < raw_labels.numel(); ++i) y.mutable_as<int64_t>()[i] = raw_labels.as<uint8_t>()[i];
  DataSet d;
  d.source = images + "," + labels;
  d.arrays = {{input_key, std::move(x)}, {labels_key, std::move(y)}};
  return d;
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

DataSet load_csv(const std::string& path, const std::string& input_key, const std::string& labels_key) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open");
  std::string line;
  if (!std::getline(in, line)) throw InputError(path + ": empty CSV file (a header row is needed)");
  const std::vector<std::string> header = split_csv_line(line);
  size_t label_col = header.size();
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == labels_key) label_col = i;
  if (label_col == header.size())
    throw InputError(path + ": the header has no column '" + labels_key + "' for the labels");
  std::vector<float> features;
  std::vector<double> labels;
  int64_t rows = 0;
  for (int64_t line_no = 2; std::getline(in, line); ++line_no) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = split_csv_line(line);
    if (cells.size() != header.size())
      throw InputError(path + ":" + std::to_string(line_no) + ": " + std::to_string(cells.size()) + " cells, the header has " +
                       std::to_string(header.size()));
    for (size_t i = 0; i < cells.size(); ++i) {
      char* end = nullptr;
      const double v = std::strtod(cells[i].c_str(), &end);
      if (cells[i].empty() || *end)
        throw InputError(path + ":" + std::to_string(line_no) + ": '" + cells[i] + "' in column '" + header[i] +
                         "' is not a number");
      if (i == label_col)
        labels.push_back(v);
      else
        features.push_back(static_cast<float>(v));
    }
    ++rows;
  }
  const int64_t width = static_cast<int64_t>(header.size()) - 1;
  Tensor x(DType::kFloat, {rows, width});
  if (!features.empty()) std::memcpy(x.mutable_data(), features.data(), features.size() * sizeof(float));
  // Labels stay fp64 here; conform() converts them to what the loss takes (and rejects fractions
  // for class indices).
  Tensor y(DType::kDouble, {rows});
  if (!labels.empty()) std::memcpy(y.mutable_data(), labels.data(), labels.size() * sizeof(double));
  DataSet d;
  d.source = path;
  d.arrays = {{input_key, std::move(x)}, {labels_key, std::move(y)}};
  return d;
}

// Element i of any numeric tensor as double / int64.
double as_double(const Tensor& t, int64_t i) { return t.element(i); }

Tensor converted(const Tensor& t, DType to, const std::string& what) {
  if (t.dtype == to) return t;
  Tensor out(to, t.dims);
  const bool to_int = to == DType::kInt64 || to == DType::kInt32;
  if (to_int && is_floating(t.dtype))
    for (int64_t i = 0; i < t.numel(); ++i)
      if (as_double(t, i) != std::floor(as_double(t, i)))
        throw InputError(what + " holds " + std::string(dtype_name(t.dtype)) + " values such as " +
                         std::to_string(as_double(t, i)) + ", the input takes " + std::string(dtype_name(to)) +
                         " (class indices)");
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = as_double(t, i);
    switch (to) {
      case DType::kFloat: out.mutable_as<float>()[i] = static_cast<float>(v); break;
      case DType::kDouble: out.mutable_as<double>()[i] = v; break;
      case DType::kInt64: out.mutable_as<int64_t>()[i] = static_cast<int64_t>(v); break;
      case DType::kInt32: out.mutable_as<int32_t>()[i] = static_cast<int32_t>(v); break;
      default:
        throw InputError(what + " is " + std::string(dtype_name(t.dtype)) + ", the input takes " +
                         std::string(dtype_name(to)) + ", which amp-train does not convert to");
    }
  }
  return out;
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

DataSet load_data(const std::string& spec, const std::string& input_key, const std::string& labels_key) {
  DataSet d;
  if (ends_with(spec, ".npz")) {
    d.source = spec;
    d.arrays = read_npz(spec);
  } else if (ends_with(spec, ".csv")) {
    d = load_csv(spec, input_key, labels_key);
  } else {
    d = load_idx(spec, input_key, labels_key);
  }
  if (d.arrays.empty()) throw InputError(d.source + ": no arrays");
  for (const auto& [key, t] : d.arrays) {
    if (t.dims.empty()) throw InputError(d.source + ": array '" + key + "' is a scalar; arrays need a sample axis");
    if (d.size == 0) d.size = t.dims[0];
    if (t.dims[0] != d.size)
      throw InputError(d.source + ": array '" + key + "' has " + std::to_string(t.dims[0]) + " samples, '" +
                       d.arrays[0].first + "' has " + std::to_string(d.size));
  }
  if (d.size == 0) throw InputError(d.source + ": the data set is empty");
  return d;
}

void conform(DataSet& d, const Graph& g, const std::vector<std::string>& inputs) {
  for (auto it = d.arrays.begin(); it != d.arrays.end();) {
    if (std::find(inputs.begin(), inputs.end(), it->first) != inputs.end()) {
      ++it;
      continue;
    }
    spdlog::warn("{}: array '{}' is not an input of the training step; ignored", d.source, it->first);
    it = d.arrays.erase(it);
  }
  for (const std::string& name : inputs) {
    const Value* v = g.value(name);
    auto it = d.arrays.begin();
    while (it != d.arrays.end() && it->first != name) ++it;
    if (it == d.arrays.end()) {
      std::string keys;
      for (const auto& a : d.arrays) keys += (keys.empty() ? "" : ", ") + a.first;
      throw InputError(d.source + ": no array '" + name + "' for graph input " + name + " (" + v->type().str() +
                       "); the data has: " + keys);
    }
    Tensor& t = it->second;
    const std::string what = d.source + ": array '" + name + "'";
    t = converted(t, v->dtype(), what);
    if (!v->type().shape) continue;
    const auto& want = v->type().shape->dims;
    std::vector<int64_t> sample(t.dims.begin() + 1, t.dims.end());
    bool fits = want.size() == sample.size() + 1;
    int64_t want_numel = 1;
    bool want_static = true;
    for (size_t i = 1; i < want.size(); ++i) {
      want_static = want_static && want[i].is_static();
      want_numel *= want[i].value.value_or(1);
      if (fits && want[i].is_static() && *want[i].value != sample[i - 1]) fits = false;
    }
    if (fits) continue;
    int64_t numel = 1;
    for (int64_t s : sample) numel *= s;
    std::string expect = "[N";
    for (size_t i = 1; i < want.size(); ++i)
      expect += "," + (want[i].is_static() ? std::to_string(*want[i].value) : std::string("?"));
    expect += "]";
    if (is_floating(v->dtype()) && want_static && numel == want_numel) {
      std::vector<int64_t> dims{t.dims[0]};
      for (size_t i = 1; i < want.size(); ++i) dims.push_back(*want[i].value);
      t = Tensor::from_bytes(t.dtype, dims, std::string(reinterpret_cast<const char*>(t.data()), t.nbytes()));
      continue;
    }
    throw InputError(what + " has samples of shape " + dims_text(sample) + " (array " + dims_text(t.dims) +
                     "); graph input " + name + " takes " + expect);
  }
}

void check_finite(const DataSet& d, bool strict, bool report) {
  for (const auto& [key, t] : d.arrays) {
    const NonFiniteCount c = count_non_finite(t);
    if (!c.any()) continue;
    const std::string what = d.source + ": array '" + key + "' has " + c.text(d.size);
    if (strict) throw InputError(what + " (--strict-data)");
    if (report)
      spdlog::warn("{}; a batch holding one has a non-finite loss and its step is skipped (--strict-data refuses such data)",
                   what);
  }
}

namespace {

// Batches of at least this many bytes are gathered by several threads.
constexpr size_t kThreadedGatherBytes = size_t{8} << 20;

}  // namespace

// A large batch is gathered by several threads, each copying a run of rows: the batch's fresh
// pages are faulted in as they are first written, and one thread doing that for ResNet-50's 77 MB
// of images at batch 128 took longer than the step they fed (an H200, 2026-11-28: the bf16 step's
// device worked 24 of its 67 ms while the loader gathered the next batch).
std::vector<std::pair<std::string, Tensor>> gather_rows(const DataSet& d, const std::vector<int64_t>& rows) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [key, t] : d.arrays) {
    std::vector<int64_t> dims = t.dims;
    dims[0] = static_cast<int64_t>(rows.size());
    Tensor b(t.dtype, dims);
    const size_t row_bytes = t.nbytes() / static_cast<size_t>(t.dims[0]);
    uint8_t* const to = b.mutable_data();
    const uint8_t* const from = t.data();
    auto copy = [&](size_t first, size_t last) {
      for (size_t i = first; i < last; ++i)
        std::memcpy(to + i * row_bytes, from + static_cast<size_t>(rows[i]) * row_bytes, row_bytes);
    };
    const size_t bytes = rows.size() * row_bytes;
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    const size_t threads = bytes < kThreadedGatherBytes
                               ? 1
                               : std::min<size_t>({rows.size(), std::max(2u, cores / 2), size_t{8}});
    if (threads <= 1) {
      copy(0, rows.size());
    } else {
      std::vector<std::thread> pool;
      const size_t per = (rows.size() + threads - 1) / threads;
      for (size_t k = 1; k < threads; ++k)
        if (k * per < rows.size()) pool.emplace_back(copy, k * per, std::min(rows.size(), (k + 1) * per));
      copy(0, std::min(rows.size(), per));
      for (std::thread& th : pool) th.join();
    }
    b.name = key;
    out.emplace_back(key, std::move(b));
  }
  return out;
}

}  // namespace amp
