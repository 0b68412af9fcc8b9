// numpy's .npy and .npz files <-> Tensors, the exchange format of amp-run and the tests.
//
// .npy: format versions 1-3, little-endian or byte-sized dtypes '<f4' '<f2' '<f8' '<i8' '<i4' '<i2'
// '|i1' '|u1' '<u2' '<u4' '<u8' '|b1', C order only (a Fortran-order array is an InputError that
// says to save it with np.ascontiguousarray). .npz: a zip of <key>.npy members, stored or
// deflated (np.savez and np.savez_compressed), read and written with libzip.
//
// bfloat16 has no numpy dtype: a bf16 tensor is written as '<u2' (its raw bits) under the key
// "<name>.bf16", and a '<u2' member whose key ends in ".bf16" is read back as bf16 named
// "<name>". In numpy: `bits = np.asarray(x, np.float32).view(np.uint32) >> 16` (truncating; round
// first if it matters) and `np.float32(bits.astype(np.uint32) << 16)` to widen.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "graph/tensor.h"

namespace amp {

inline constexpr char kBf16KeySuffix[] = ".bf16";

// Parses one .npy image; `what` names it in errors (a file, or "file.npz:key").
Tensor parse_npy(const std::string& bytes, const std::string& what);
std::string format_npy(const Tensor& t);

Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const Tensor& t);

// Arrays in member order, keyed without ".npy" (and without ".bf16" for bf16 arrays); each
// Tensor's name is its key. Throws InputError naming the file (and key) for anything malformed.
std::vector<std::pair<std::string, Tensor>> read_npz(const std::string& path);
// Replaces `path` as a whole (libzip writes a temporary and renames it).
void write_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays,
               bool compress = true);

}  // namespace amp
