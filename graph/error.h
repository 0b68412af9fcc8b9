// The one exception type of the project. Messages name the file, node and op involved, so the
// frontends can print `what()` as the single error line a user sees.
#pragma once

#include <stdexcept>
#include <string>

namespace amp {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input from the user (a model, a flag, a data file): frontends exit with code 2 on it;
// any other Error is an internal failure (exit code 1).
class InputError : public Error {
 public:
  using Error::Error;
};

// ONNX errors come with a multi-line context, and names in a malformed file can hold any bytes:
// the user sees one printable line (whitespace runs become one space, control bytes \xNN).
std::string one_line(const std::string& s);

}  // namespace amp
