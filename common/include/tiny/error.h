/// @file error.h
/// @brief The exceptions the library throws, named after the Python exceptions PyTorch raises.
///
/// Every error is a C++ exception whose `what()` is the message a PyTorch user would recognise.
/// The library never aborts. Where PyTorch warns and goes on (a loss whose target broadcasts
/// against its input, a matmul precision it does not know), the library does too, through warn().
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace tiny {

/// Base of every error the library raises; PyTorch's `RuntimeError`.
class Error : public std::runtime_error {
 public:
  /// An error whose what() is `message`.
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// PyTorch's `RuntimeError`: shapes that do not fit, views that cannot be expressed, ...
class RuntimeError : public Error {
 public:
  using Error::Error;  ///< constructed from the message, like Error
};

/// PyTorch's `IndexError`: a dimension or an index out of range.
class IndexError : public Error {
 public:
  using Error::Error;  ///< constructed from the message, like Error
};

/// Python's `KeyError`: a module or parameter name PyTorch refuses ("module name can't contain
/// \".\", got: a.b"). Python prints a KeyError's message quoted, as the repr of a string; what()
/// is the message itself.
class KeyError : public Error {
 public:
  using Error::Error;  ///< constructed from the message, like Error
};

/// PyTorch's `ValueError`: malformed input values (ragged nested lists, a mismatched loss target).
class ValueError : public Error {
 public:
  using Error::Error;  ///< constructed from the message, like Error
};

/// PyTorch's `TypeError`: an operation given a dtype it does not accept.
class TypeError : public Error {
 public:
  using Error::Error;  ///< constructed from the message, like Error
};

/// Python's `AssertionError`: one of PyTorch's Python-level `assert` checks failed (GradScaler
/// checks its arguments and the order of its calls this way).
class AssertionError : public Error {
 public:
  using Error::Error;  ///< constructed from the message, like Error
};

/// Python's `ZeroDivisionError`: a function PyTorch writes in Python divided by zero
/// (nn.init.trunc_normal_ with std = 0: "float division by zero").
class ZeroDivisionError : public Error {
 public:
  using Error::Error;  ///< constructed from the message, like Error
};

/// PyTorch's `NotImplementedError`: an op with no kernel for a dtype ("\"pow\" not implemented
/// for 'Bool'"), or a Module without forward(). PyTorch 2.x raises it where 1.13 raised
/// RuntimeError; in Python it is a subclass of RuntimeError, so here too, and code that catches
/// RuntimeError catches it.
class NotImplementedError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;  ///< constructed from the message, like Error
};

/// PyTorch's `torch.utils.checkpoint.CheckpointError`, a RuntimeError: a checkpointed region
/// saved other tensors when it ran again during backward than it did the first time.
class CheckpointError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;  ///< constructed from the message, like Error
};

/// einops' `EinopsError`, a RuntimeError (in einops too): a rearrange, reduce or einsum pattern
/// that einops refuses, in einops' words.
class EinopsError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;  ///< constructed from the message, like Error
};

/// What a starter copy throws where an exercise's solution was removed; its what() is
/// "not implemented: <exercise>", the words scripts/grade.py looks for.
class ExerciseNotImplemented : public NotImplementedError {
 public:
  /// "not implemented: <exercise>".
  explicit ExerciseNotImplemented(const std::string& exercise)
      : NotImplementedError("not implemented: " + exercise) {}
};

/// Prints "UserWarning: <message>" on standard error, the first time this process gives this
/// message: Python's default filter shows a warning once per place in the code, so a training
/// loop that makes the same mistake every step is told once.
void warn(const std::string& message);

/// Collects the warnings given while it lives, every one of them, instead of printing them
/// (Python's `warnings.catch_warnings(record=True)` with the filter "always"). Captures nest: the
/// innermost one collects.
class WarningCapture {
 public:
  WarningCapture();
  ~WarningCapture();
  WarningCapture(const WarningCapture&) = delete;             ///< one capture, one scope
  WarningCapture& operator=(const WarningCapture&) = delete;  ///< one capture, one scope
  /// The messages given so far, in order, without the "UserWarning: " prefix.
  const std::vector<std::string>& messages() const { return messages_; }

 private:
  friend void warn(const std::string& message);
  std::vector<std::string> messages_;
  WarningCapture* outer_;
};

}  // namespace tiny
