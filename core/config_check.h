#pragma once
// Checking one config value against its schema field, and "did you mean" for unknown keys and
// sections. Private to core/ (core/config_load.cpp checks files, --set pairs and resolved configs).
#include <cstdint>
#include <optional>
#include <string>

#include <toml++/toml.h>

#include "core/config_schema.h"

namespace mpirl::detail {

// The exact int64 value of an integer, or of a float that is one (1e6, 2.0); else nothing.
std::optional<int64_t> exact_integer(const toml::node& n);
// " (did you mean 'x'?)" for the closest known key (or section), or "".
std::string did_you_mean(const std::string& key, bool section);
// A value as TOML text (floats in their shortest form).
std::string render(const toml::node& n);
// Throws ConfigError naming `key`, the value, `origin` and what `f` expects, unless `n` fits it.
void check_value(const std::string& key, const Field& f, const toml::node& n, const std::string& origin);

}  // namespace mpirl::detail
