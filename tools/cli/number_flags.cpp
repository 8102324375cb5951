#include "tools/cli/number_flags.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string_view>

namespace ordo::tools {

namespace {

std::string in_quotes(const std::string& text) { return "'" + text + "'"; }

// A leading '+' is fine for people; std::from_chars does not take it.
std::string_view without_plus(std::string_view text) {
  if (text.size() > 1 && text.front() == '+' && text[1] != '-' && text[1] != '+') text.remove_prefix(1);
  return text;
}

// Parses all of `text` as a decimal real; false when anything is left over.
bool parse_real(std::string_view text, double& value, std::errc& error) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, std::chars_format::general);
  error = ec;
  return end == text.data() + text.size() && (ec == std::errc() || ec == std::errc::result_out_of_range);
}

}  // namespace

std::string check_whole_number(std::string& text, bool non_negative) {
  const std::string_view digits = without_plus(text);
  const bool negative = !digits.empty() && digits.front() == '-';
  const std::string_view magnitude = negative ? digits.substr(1) : digits;
  if (magnitude.empty() || magnitude.find_first_not_of("0123456789") != std::string_view::npos) {
    double ignored = 0;
    std::errc error{};
    if (!digits.empty() && parse_real(digits, ignored, error)) return in_quotes(text) + " is not a whole number";
    return in_quotes(text) + " is not a number";
  }
  if (non_negative) {
    if (negative && magnitude.find_first_not_of('0') != std::string_view::npos)
      return in_quotes(text) + " is negative (give a whole number >= 0)";
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(magnitude.data(), magnitude.data() + magnitude.size(), value);
    if (ec != std::errc())
      return in_quotes(text) + " is out of range (whole numbers from 0 to " +
             std::to_string(std::numeric_limits<std::uint64_t>::max()) + ")";
    text = std::to_string(value);
    return "";
  }
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc())
    return in_quotes(text) + " is out of range (whole numbers from " +
           std::to_string(std::numeric_limits<std::int64_t>::min()) + " to " +
           std::to_string(std::numeric_limits<std::int64_t>::max()) + ")";
  text = std::to_string(value);
  return "";
}

std::string check_real_number(std::string& text) {
  const std::string_view digits = without_plus(text);
  double value = 0;
  std::errc error{};
  if (digits.empty() || !parse_real(digits, value, error)) return in_quotes(text) + " is not a number";
  // from_chars leaves `value` alone when out of range; strtod tells overflow (infinity)
  // from underflow (a number too close to 0, fine as 0).
  if (error == std::errc::result_out_of_range && std::isinf(std::strtod(std::string(digits).c_str(), nullptr)))
    return in_quotes(text) + " is out of range (numbers up to about 1.8e308)";
  if (!std::isfinite(value)) return in_quotes(text) + " is not a finite number";
  text = std::string(digits);
  return "";
}

namespace {

// The kind of value an option takes, from its full type name: CLI11's own ("INT",
// "UINT:NONNEGATIVE", "FLOAT:POSITIVE"), or a range check's after a name of ours
// ("G:INT in [0 - 16777216]", "SECONDS:INT in [0 - 86400]": --group-size and
// --drain-timeout read "010" as octal and "0x40" as hex when only the first part was
// looked at). "" for text.
std::string value_kind(const std::string& full) {
  std::string_view rest = full;
  while (!rest.empty()) {
    const std::string_view part = rest.substr(0, rest.find(':'));
    const std::string_view word = part.substr(0, part.find(' '));
    if (word == "INT" || word == "UINT" || word == "FLOAT") return std::string(word);
    rest.remove_prefix(std::min(rest.size(), part.size() + 1));
  }
  return "";
}

}  // namespace

void require_plain_numbers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_size_max() == 0) continue;  // a flag: no value
    const std::string type = value_kind(option->get_type_name());
    if (type == "INT" || type == "UINT") {
      const bool non_negative = type == "UINT";
      option->transform(CLI::Validator(
          [non_negative](std::string& text) { return check_whole_number(text, non_negative); }, "", ""));
    } else if (type == "FLOAT") {
      option->transform(CLI::Validator([](std::string& text) { return check_real_number(text); }, "", ""));
    }
  }
  for (CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; })) require_plain_numbers(*command);
}

}  // namespace ordo::tools
