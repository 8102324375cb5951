// ordo::Error: the one exception type ordo throws for anything a user can fix.
//
// A message says what went wrong, where (a file, a tensor, a config key, a flag) and,
// when there is one, what to do about it. The CLI prints it as one line on stderr.
// The engine throws these very classes (engine/error.h includes this header), so a
// program catches ordo::Error around any call of the public API.
#pragma once

#include <stdexcept>
#include <string>

#include "ordo/export.hpp"

namespace ordo {

// Anything ordo cannot do with what it was given: a bad file, text, option or model.
class ORDO_API Error : public std::runtime_error {
 public:
  // An error with a finished message. Throws nothing of its own (std::bad_alloc aside).
  explicit Error(const std::string& message) : std::runtime_error(message) {}

  // "<where>: <what> (<hint>)". `where` names the file, tensor or key at fault.
  Error(const std::string& where, const std::string& what, const std::string& hint = "")
      : std::runtime_error(compose(where, what, hint)) {}

 private:
  static std::string compose(const std::string& where, const std::string& what,
                             const std::string& hint) {
    std::string message = where.empty() ? what : where + ": " + what;
    if (!hint.empty()) message += " (" + hint + ")";
    return message;
  }
};

// An option with a value it cannot take; field() names it as the options struct spells
// it ("beam_size"), so that the CLI can name its own flag instead ("--beam").
class ORDO_API OptionError : public Error {
 public:
  // "<field>: <what>". Throws nothing of its own.
  OptionError(const std::string& field, const std::string& what)
      : Error(field, what), field_(field), what_(what) {}
  // The options field at fault, as the struct spells it ("beam_size").
  const std::string& field() const { return field_; }
  // The message without the field name.
  const std::string& problem() const { return what_; }

 private:
  std::string field_;
  std::string what_;
};

}  // namespace ordo
