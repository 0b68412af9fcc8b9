// Training and validation data for amp-train: named arrays that share their first (sample) axis,
// read from .npz (keys = graph input names plus the labels key), from IDX files (the MNIST /
// Fashion-MNIST layout, gzipped or not) or from CSV with a header row. conform() checks the arrays
// against the step graph's inputs and converts them once, so batches are plain row gathers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "graph/tensor.h"

namespace amp {

struct DataSet {
  std::string source;  // the file(s), for messages
  std::vector<std::pair<std::string, Tensor>> arrays;
  int64_t size = 0;  // samples

  const Tensor* find(const std::string& key) const;
};

// Reads `spec`:
//   FILE.npz                    arrays as stored;
//   IMAGES.idx[.gz][,LABELS]    images as float32 in [0, 1] under `input_key`, labels as int64
//                               under `labels_key`; without LABELS, the file beside IMAGES with
//                               "images-idx3" read as "labels-idx1" (the MNIST naming);
//   FILE.csv                    a header row; the column named `labels_key` is the labels, all
//                               others, in order, are one float32 row per sample under `input_key`.
// Throws InputError naming the file for anything unreadable or inconsistent.
DataSet load_data(const std::string& spec, const std::string& input_key, const std::string& labels_key);

// Makes `d` fit the graph's data inputs: arrays no input reads are dropped (with a warning); every input must have an array (InputError naming the
// input and its type otherwise); arrays of another float or integer type are converted to the
// input's type (float labels for an integer input are an error); per-sample dims must match the
// input's static dims, or for float inputs hold as many elements (then they are reshaped).
void conform(DataSet& d, const Graph& g, const std::vector<std::string>& inputs);

// Counts NaN and inf in every float array of `d`, once: one warning line (when `report`) per array
// holding any, naming the file, the array and the first such sample; with `strict` an InputError.
void check_finite(const DataSet& d, bool strict, bool report);

// The given rows of every array, in that order: one batch.
std::vector<std::pair<std::string, Tensor>> gather_rows(const DataSet& d, const std::vector<int64_t>& rows);

}  // namespace amp
