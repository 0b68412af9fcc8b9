#include "frontends/lib/npz.h"

#include <zip.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "graph/atomic_file.h"
#include "graph/error.h"

namespace amp {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct Descr {
  const char* text;
  DType type;
};
// '<u2' is uint16 unless the key says bf16 (see npz.h).
constexpr Descr kDescrs[] = {
    {"<f4", DType::kFloat}, {"<f2", DType::kFloat16}, {"<f8", DType::kDouble}, {"<i8", DType::kInt64},
    {"<i4", DType::kInt32}, {"<i2", DType::kInt16},   {"|i1", DType::kInt8},   {"|u1", DType::kUInt8},
    {"<u2", DType::kUInt16}, {"<u4", DType::kUInt32}, {"<u8", DType::kUInt64}, {"|b1", DType::kBool},
};

// The value after 'key': in numpy's header dict, as raw text up to the next top-level ',' or '}'.
std::string header_field(const std::string& header, const std::string& key, const std::string& what) {
  const size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) throw InputError(what + ": .npy header has no '" + key + "'");
  size_t p = header.find(':', at);
  if (p == std::string::npos) throw InputError(what + ": malformed .npy header");
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  int depth = 0;
  size_t end = p;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  return header.substr(p, end - p);
}

std::string strip_quotes(std::string s) {
  while (!s.empty() && (s.back() == ' ')) s.pop_back();
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"')) return s.substr(1, s.size() - 2);
  return s;
}

std::string descr_of(DType t) {
  if (t == DType::kBFloat16) return "<u2";
  for (const Descr& d : kDescrs)
    if (d.type == t) return d.text;
  throw InputError("element type " + std::string(dtype_name(t)) + " has no .npy dtype");
}

}  // namespace

Tensor parse_npy(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0) throw InputError(what + ": not a .npy array");
  const int major = static_cast<uint8_t>(bytes[6]);
  size_t header_len, start;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw InputError(what + ": truncated .npy header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
    start = 12;
  } else {
    throw InputError(what + ": .npy format version " + std::to_string(major) + " is not supported");
  }
  if (bytes.size() < start + header_len) throw InputError(what + ": truncated .npy header");
  const std::string header = bytes.substr(start, header_len);

  const std::string descr = strip_quotes(header_field(header, "descr", what));
  DType type = DType::kUndefined;
  for (const Descr& d : kDescrs)
    if (descr == d.text) type = d.type;
  // One-byte and native-order spellings numpy also writes.
  if (descr == "<b1" || descr == "|?") type = DType::kBool;
  if (descr == "<u1") type = DType::kUInt8;
  if (descr == "<i1") type = DType::kInt8;
  if (type == DType::kUndefined)
    throw InputError(what + ": dtype '" + descr + "' is not supported (use float32/16/64, int64/32/16/8, uint8-64 or bool, little-endian)");
  if (header_field(header, "fortran_order", what).find("True") != std::string::npos)
    throw InputError(what + ": array is in Fortran order; save it in C order (np.ascontiguousarray)");

  std::vector<int64_t> dims;
  const std::string shape = header_field(header, "shape", what);
  std::stringstream ss(shape.substr(shape.find('(') + 1));
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t digit = item.find_first_of("0123456789");
    if (digit == std::string::npos) continue;
    dims.push_back(std::stoll(item.substr(digit)));
  }
  const size_t data_at = start + header_len;
  Tensor t;
  t.dtype = type;
  t.dims = dims;
  if (bytes.size() - data_at != t.nbytes())
    throw InputError(what + ": .npy holds " + std::to_string(bytes.size() - data_at) + " data bytes, " +
                     std::string(dtype_name(type)) + " " + shape + " needs " + std::to_string(t.nbytes()));
  return Tensor::from_bytes(type, dims, bytes.substr(data_at));
}

std::string format_npy(const Tensor& t) {
  std::string shape = "(";
  for (size_t i = 0; i < t.dims.size(); ++i) shape += std::to_string(t.dims[i]) + (t.dims.size() == 1 || i + 1 < t.dims.size() ? "," : "");
  shape += ")";
  std::string header = "{'descr': '" + descr_of(t.dtype) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so the data starts on a 64-byte boundary, as numpy does; the header ends in '\n'.
  const size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string out(kMagic, 6);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(t.data()), t.nbytes());
  return out;
}

Tensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_npy(ss.str(), path);
}

void write_npy(const std::string& path, const Tensor& t) {
  const std::string bytes = format_npy(t);
  AtomicFile f(path);
  f.write(bytes.data(), bytes.size());
  f.commit();
}

std::vector<std::pair<std::string, Tensor>> read_npz(const std::string& path) {
  int err = 0;
  std::unique_ptr<zip_t, int (*)(zip_t*)> za(zip_open(path.c_str(), ZIP_RDONLY, &err), zip_close);
  if (!za) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, err);
    std::string msg = zip_error_strerror(&ze);
    zip_error_fini(&ze);
    throw InputError(path + ": cannot read as .npz: " + msg);
  }
  std::vector<std::pair<std::string, Tensor>> out;
  const zip_int64_t n = zip_get_num_entries(za.get(), 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    if (zip_stat_index(za.get(), static_cast<zip_uint64_t>(i), 0, &st) != 0)
      throw InputError(path + ": unreadable zip member " + std::to_string(i));
    std::string key = st.name;
    if (key.size() < 4 || key.compare(key.size() - 4, 4, ".npy") != 0)
      throw InputError(path + ": member '" + key + "' is not a .npy array");
    key.resize(key.size() - 4);
    std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> f(zip_fopen_index(za.get(), static_cast<zip_uint64_t>(i), 0),
                                                        zip_fclose);
    if (!f) throw InputError(path + ": cannot open member '" + key + "': " + zip_strerror(za.get()));
    std::string bytes(static_cast<size_t>(st.size), '\0');
    if (zip_fread(f.get(), bytes.data(), st.size) != static_cast<zip_int64_t>(st.size))
      throw InputError(path + ": member '" + key + "' is truncated or corrupt");
    Tensor t = parse_npy(bytes, path + ":" + key);
    const size_t suffix = std::strlen(kBf16KeySuffix);
    if (key.size() > suffix && key.compare(key.size() - suffix, suffix, kBf16KeySuffix) == 0) {
      if (t.dtype != DType::kUInt16)
        throw InputError(path + ":" + key + ": a '" + kBf16KeySuffix + "' array must hold uint16 bits");
      key.resize(key.size() - suffix);
      t = Tensor::from_bytes(DType::kBFloat16, t.dims, std::string(reinterpret_cast<const char*>(t.data()), t.nbytes()));
    }
    t.name = key;
    out.emplace_back(key, std::move(t));
  }
  return out;
}

void write_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays, bool compress) {
  int err = 0;
  zip_t* za = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!za) throw InputError(path + ": cannot create .npz (libzip error " + std::to_string(err) + ")");
  // libzip reads the sources at zip_close: the images must live until then.
  std::vector<std::string> images;
  images.reserve(arrays.size());
  try {
    for (const auto& [key, t] : arrays) {
      images.push_back(format_npy(t));
      const std::string member = key + (t.dtype == DType::kBFloat16 ? kBf16KeySuffix : "") + ".npy";
      zip_source_t* src = zip_source_buffer(za, images.back().data(), images.back().size(), 0);
      if (!src) throw Error(path + ": " + zip_strerror(za));
      const zip_int64_t idx = zip_file_add(za, member.c_str(), src, ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8);
      if (idx < 0) {
        zip_source_free(src);
        throw Error(path + ": cannot add '" + member + "': " + zip_strerror(za));
      }
      zip_set_file_compression(za, static_cast<zip_uint64_t>(idx), compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
    }
  } catch (...) {
    zip_discard(za);
    throw;
  }
  if (zip_close(za) != 0) {
    const std::string msg = zip_strerror(za);
    zip_discard(za);
    throw Error(path + ": cannot write .npz: " + msg);
  }
}

}  // namespace amp
