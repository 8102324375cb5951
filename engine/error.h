// ordo::Error: the one exception type ordo throws for anything a user can fix.
//
// A message says what went wrong, where (a file, a tensor, a config key, a flag) and,
// when there is one, what to do about it. The CLI prints it as one line on stderr.
#pragma once

#include <stdexcept>
#include <string>

namespace ordo {

class Error : public std::runtime_error {
 public:
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
class OptionError : public Error {
 public:
  OptionError(const std::string& field, const std::string& what)
      : Error(field, what), field_(field), what_(what) {}
  const std::string& field() const { return field_; }
  // The message without the field name.
  const std::string& problem() const { return what_; }

 private:
  std::string field_;
  std::string what_;
};

}  // namespace ordo
