// One reading of numbers for every flag of every command.
//
// CLI11 converts with strtoll/strtold: "010" is octal 8, "0x2" is 2, " 2" and "" pass,
// "-1" becomes 2^64-1 for an unsigned flag, a huge number saturates silently, and what
// does not convert is reported as "Could not convert: --beam = abc" or, behind a range
// check, "Value abc not in range". require_plain_numbers puts a check in front of every
// option whose value is a number (CLI11's type INT, UINT or FLOAT), so that:
//   - a whole number is decimal digits with an optional sign, nothing else, and within
//     64 bits: "--beam: 'abc' is not a number", "--beam: '2.5' is not a whole number",
//     "--seed: '-1' is negative (give a whole number >= 0)", "--beam: '99999999999999999999'
//     is out of range (whole numbers from -9223372036854775808 to 9223372036854775807)";
//     it reaches CLI11 rewritten in plain decimal ("010" -> "10");
//   - a real number is decimal (as "0.5", "1e-3") and finite: "--temperature: 'nan' is
//     not a finite number".
// Ranges stay with each flag (its CLI11 Range or its options struct's validate()),
// which say the range. Every failure is a usage error: exit 2, one line.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace ordo::tools {

// Adds the check to every numeric option of `app` and of its commands, recursively.
// Call once, after every command is set up.
void require_plain_numbers(CLI::App& app);

// The checks themselves, for tests: "" when `text` is fine (then rewritten in place to
// what CLI11 should read), else the message.
std::string check_whole_number(std::string& text, bool non_negative);
std::string check_real_number(std::string& text);

}  // namespace ordo::tools
