// .npy / .npz reading and writing against numpy itself (npz_reference.py): numpy's stored and
// deflated archives read back value for value, ours load in numpy unchanged, and the bf16 key
// convention round-trips.
#include <gtest/gtest.h>

#include "frontends/lib/npz.h"
#include "graph/error.h"
#include "graph/half.h"
#include "tests/support/test_support.h"

namespace amp::test {
namespace {

// The arrays npz_reference.py builds, in the same order.
std::vector<std::pair<std::string, Tensor>> expected_arrays() {
  const DType types[] = {DType::kFloat, DType::kFloat16, DType::kDouble, DType::kInt64, DType::kInt32, DType::kInt16,
                         DType::kInt8,  DType::kUInt8,   DType::kUInt16, DType::kUInt32, DType::kUInt64, DType::kBool};
  std::vector<std::pair<std::string, Tensor>> out;
  for (DType t : types) {
    Tensor a(t, {2, 3, 4});
    for (int64_t k = 0; k < 24; ++k) {
      const int64_t v = k * 7 % 23, s = v - 11;
      uint8_t* p = a.mutable_data();
      switch (t) {
        case DType::kFloat: reinterpret_cast<float*>(p)[k] = static_cast<float>(s); break;
        case DType::kFloat16: reinterpret_cast<uint16_t*>(p)[k] = fp32_to_fp16(static_cast<float>(s)); break;
        case DType::kDouble: reinterpret_cast<double*>(p)[k] = static_cast<double>(s); break;
        case DType::kInt64: reinterpret_cast<int64_t*>(p)[k] = s; break;
        case DType::kInt32: reinterpret_cast<int32_t*>(p)[k] = static_cast<int32_t>(s); break;
        case DType::kInt16: reinterpret_cast<int16_t*>(p)[k] = static_cast<int16_t>(s); break;
        case DType::kInt8: reinterpret_cast<int8_t*>(p)[k] = static_cast<int8_t>(s); break;
        case DType::kUInt8: p[k] = static_cast<uint8_t>(v); break;
        case DType::kUInt16: reinterpret_cast<uint16_t*>(p)[k] = static_cast<uint16_t>(v); break;
        case DType::kUInt32: reinterpret_cast<uint32_t*>(p)[k] = static_cast<uint32_t>(v); break;
        case DType::kUInt64: reinterpret_cast<uint64_t*>(p)[k] = static_cast<uint64_t>(v); break;
        default: p[k] = v % 2; break;
      }
    }
    out.emplace_back(std::string(dtype_name(t) == "float" ? "float32" : dtype_name(t) == "double" ? "float64"
                                                                                                   : dtype_name(t)),
                     a);
  }
  Tensor scalar(DType::kFloat, {});
  scalar.mutable_as<float>()[0] = 3.25f;
  out.emplace_back("scalar", scalar);
  out.emplace_back("empty", Tensor(DType::kFloat, {0, 3}));
  Tensor bf(DType::kBFloat16, {2, 3, 4});
  for (int64_t k = 0; k < 24; ++k) bf.mutable_as<uint16_t>()[k] = fp32_to_bf16(0.5f * static_cast<float>(k * 7 % 23 - 11));
  out.emplace_back("half_steps", bf);
  return out;
}

std::string write_python_files() {
  const std::string dir = temp_dir("npz");
  std::string out;
  EXPECT_EQ(run_python(source_dir() + "/tests/frontends/npz_reference.py write " + dir, &out), 0) << out;
  return dir;
}

TEST(Npz, ReadsNumpyStoredAndDeflatedArchives) {
  const std::string dir = write_python_files();
  for (const char* file : {"py_stored.npz", "py_deflated.npz"}) {
    const auto got = read_npz(dir + "/" + file);
    const auto want = expected_arrays();
    ASSERT_EQ(got.size(), want.size()) << file;
    for (const auto& [key, t] : want) {
      auto it = std::find_if(got.begin(), got.end(), [&](const auto& g) { return g.first == key; });
      ASSERT_NE(it, got.end()) << file << " lacks " << key;
      EXPECT_TRUE(it->second.same_contents(t)) << file << ": " << key;
      EXPECT_EQ(it->second.name, key);
    }
  }
}

TEST(Npz, NumpyReadsWhatWeWrite) {
  const std::string dir = temp_dir("npz_ours");
  for (bool compress : {false, true}) {
    const std::string path = dir + (compress ? "/deflated.npz" : "/stored.npz");
    write_npz(path, expected_arrays(), compress);
    std::string out;
    EXPECT_EQ(run_python(source_dir() + "/tests/frontends/npz_reference.py check " + path, &out), 0) << out;
    // And back: the bf16 key convention restores the type and the name.
    const auto back = read_npz(path);
    EXPECT_EQ(back.back().first, "half_steps");
    EXPECT_EQ(back.back().second.dtype, DType::kBFloat16);
  }
  Tensor one(DType::kInt32, {3});
  write_npy(dir + "/one.npy", one);
  EXPECT_TRUE(read_npy(dir + "/one.npy").same_contents(one));
}

TEST(Npz, MalformedInputIsAnInputErrorNamingTheFileAndKey) {
  const std::string dir = write_python_files();
  auto error_of = [](const std::function<void()>& fn) -> std::string {
    try {
      fn();
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no InputError)";
  };
  EXPECT_NE(error_of([&] { read_npz(dir + "/fortran.npz"); }).find("fortran.npz:input: array is in Fortran order"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_npz(dir + "/big_endian.npz"); }).find("dtype '>f4' is not supported"),
            std::string::npos);
  write_file(dir + "/junk.npz", "not a zip");
  EXPECT_NE(error_of([&] { read_npz(dir + "/junk.npz"); }).find("junk.npz: cannot read as .npz"), std::string::npos);
  EXPECT_NE(error_of([&] { parse_npy(std::string("\x93NUMPY\x01\x00", 8) + "xx", "bad.npy"); }).find("bad.npy"),
            std::string::npos);
}

}  // namespace
}  // namespace amp::test
