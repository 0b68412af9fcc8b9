// Where ONNX 1.12's version converter fails on valid models, found before it runs: its assertions
// name neither the node nor the op ("Assertion `dim.is_int` failed: N Dimension is a param"), and
// one of its adapters turns a valid model into a different computation without a word. Each case
// below was read from its adapters (onnx/version_converter/adapters/*.h, convert.h) and reproduced
// on a minimal model (tests/frontends/converter_refusals_test.cc has one model per case).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

namespace amp {

// Before converting the main graph of `p` from opset `from` to `to` (types and shapes inferred):
// drops BatchNormalization's training outputs 4 and 5 (opsets 9-13: saved mean and variance) where
// nothing reads them, which the 13 -> 14 adapter refuses; then throws InputError
// "<path>: node '<name>' (<op>): ONNX's version converter cannot take it from opset a to b: <why>"
// for the first node the converter would assert on or convert wrongly:
//  - an op whose schema changes at a step the converter has no adapter for (Equal, Greater, Less,
//    And, Or, Xor, LSTM, GRU, RNN at 6 -> 7; Cast and Tile at 5 -> 6; GRU at 2 -> 3; Pad, Split,
//    LpPool, GlobalLpPool at 1 -> 2), read from the converter's own table;
//  - Add, Sub, Mul, Div, Pow at 6 -> 7 with a `broadcast` attribute and an input whose dims are not
//    all numbers, or whose dims the converter finds not broadcastable (a symbolic dim against a
//    number other than 1);
//  - Gemm at 6 -> 7 with an input whose dims are not all numbers;
//  - BatchNormalization and Dropout at 6 -> 7 with is_test = 0 (training), BatchNormalization at
//    8 -> 9 with spatial = 0, BatchNormalization at 13 -> 14 with outputs 4 and 5 in use;
//  - Upsample at 6 -> 7 on an input that is not known to be 4-D;
//  - Scan at 8 -> 9: the adapter makes opset 8's batch axis the scan axis and leaves the body as it
//    was, a different computation.
void prepare_for_converter(onnx::ModelProto& p, int64_t from, int64_t to, const std::string& path);

}  // namespace amp
