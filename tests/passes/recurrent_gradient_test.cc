// LSTM, GRU and RNN gradients (ai.onnx_amp LSTMGrad / GRUGrad / RNNGrad) against PyTorch's
// autograd of nn.LSTM, nn.GRU and nn.RNN as torch 1.13 exports them for training
// (tests/passes/torch_exports.py: batch_first through Transposes, both directions, learned initial
// states through Expand, the weights sliced and concatenated into ONNX's gate order): every
// parameter's gradient, the initial states' included, within 2e-5 + 1e-4 |PyTorch's|. Central
// differences in float64 check the same rules over every attribute (gradient_check_test.cc).
#include <gtest/gtest.h>

#include "tests/support/torch_exports.h"

namespace amp::test {
namespace {

class RecurrentGradient : public ::testing::TestWithParam<std::string> {};

TEST_P(RecurrentGradient, ExportedLayerGetsPyTorchsGradients) {
  TorchExport e = torch_export(GetParam());
  int layers = 0;
  for (const Node* n : e.model.graph->nodes())
    layers += n->op_type() == "LSTM" || n->op_type() == "GRU" || n->op_type() == "RNN";
  EXPECT_EQ(layers, 1);
  expect_pytorch_gradients(e, 2e-5, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Torch, RecurrentGradient,
                         ::testing::Values("lstm", "bilstm_h0", "gru", "gru_h0", "rnn", "rnn_relu"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace amp::test
