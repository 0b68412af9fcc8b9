// amp-train's batches (frontends/lib/training_data.h): gather_rows copies the asked rows of every
// array, in the order asked, a row asked twice twice; a batch of 8 MiB or more is copied by several
// threads (each a run of the rows), which must give the same bytes as one.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "frontends/lib/training_data.h"

namespace amp {
namespace {

DataSet data_set(int64_t samples, int64_t row_floats) {
  DataSet d;
  d.source = "test";
  d.size = samples;
  Tensor x(DType::kFloat, {samples, row_floats});
  float* xs = x.mutable_as<float>();
  for (int64_t i = 0; i < x.numel(); ++i) xs[i] = static_cast<float>(i % 1000003) * 0.5f + static_cast<float>(i / row_floats);
  Tensor labels(DType::kInt64, {samples});
  std::iota(labels.mutable_as<int64_t>(), labels.mutable_as<int64_t>() + samples, int64_t{100});
  d.arrays = {{"input", std::move(x)}, {"labels", std::move(labels)}};
  return d;
}

void expect_rows(const DataSet& d, const std::vector<int64_t>& rows) {
  const auto batch = gather_rows(d, rows);
  ASSERT_EQ(batch.size(), d.arrays.size());
  for (size_t a = 0; a < batch.size(); ++a) {
    const Tensor& src = d.arrays[a].second;
    const Tensor& got = batch[a].second;
    EXPECT_EQ(batch[a].first, d.arrays[a].first);
    ASSERT_EQ(got.dims[0], static_cast<int64_t>(rows.size()));
    const size_t row = src.nbytes() / static_cast<size_t>(src.dims[0]);
    for (size_t i = 0; i < rows.size(); ++i)
      EXPECT_EQ(std::memcmp(got.data() + i * row, src.data() + static_cast<size_t>(rows[i]) * row, row), 0)
          << d.arrays[a].first << " row " << i << " (sample " << rows[i] << ")";
  }
}

TEST(TrainingData, GatheredBatchesHoldTheirRowsInTheOrderAsked) {
  const std::vector<int64_t> rows = {5, 39, 0, 5, 17, 38, 1, 22, 9, 30, 12, 33, 2};
  {
    SCOPED_TRACE("a small batch, one thread");
    expect_rows(data_set(40, 16), rows);
  }
  {
    SCOPED_TRACE("13 rows of 1 MiB: several threads");
    expect_rows(data_set(40, 262144), rows);
  }
  {
    SCOPED_TRACE("fewer rows than threads");
    expect_rows(data_set(40, 4194304), {3, 1});
  }
}

}  // namespace
}  // namespace amp
