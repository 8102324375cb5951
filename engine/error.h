// ordo::Error and ordo::OptionError, the exceptions ordo throws for anything a user can
// fix, are part of the public API (engine/include/ordo/error.hpp): the engine throws
// the very classes a program using <ordo/ordo.hpp> catches. This header keeps the
// engine's include path.
#pragma once

#include "ordo/error.hpp"
