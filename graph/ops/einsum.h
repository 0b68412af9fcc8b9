// ONNX Einsum's equation, parsed once for the shape rule, the CPU kernel and the gradient: one
// term of letters per operand and the output's (explicit after "->", or implicit: the letters that
// appear once, in alphabetical order). Spaces are ignored; a letter repeated within a term takes
// the diagonal. Ellipses ("...") are refused with an InputError that names them.
#pragma once

#include <string>
#include <vector>

namespace amp {

struct EinsumEquation {
  std::vector<std::string> inputs;  // one term per operand
  std::string output;
  std::string letters;  // every distinct letter, output's first, then the summed ones
};

EinsumEquation parse_einsum(const std::string& equation, size_t operands);

// The extent of every letter (EinsumEquation::letters order) from the operands' dims; InputError
// when a term's length differs from its operand's rank or one letter has two extents.
std::vector<int64_t> einsum_extents(const EinsumEquation& e, const std::vector<std::vector<int64_t>>& dims);

// The output dims for those extents.
std::vector<int64_t> einsum_output_dims(const EinsumEquation& e, const std::vector<int64_t>& extents);

}  // namespace amp
