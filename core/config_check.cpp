// Checking config values against the schema (type, range, choices), with "did you mean" for keys
// and sections that do not exist (core/config_check.h).
#include "core/config_check.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace mpirl::detail {
namespace {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Int: return "an integer";
    case Kind::Float: return "a number";
    case Kind::String: return "a string";
    case Kind::IntList: return "a list of integers";
    case Kind::Bool: return "true or false";
  }
  return "?";
}

// Levenshtein distance (for "did you mean").
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string leaf(const std::string& key) { return key.substr(key.rfind('.') + 1); }

}  // namespace

// An integer given as a float (1e6, 2.0): its exact int64 value, or nothing when it has a
// fraction or lies outside int64.
std::optional<int64_t> exact_integer(const toml::node& n) {
  if (n.is_integer()) return *n.value<int64_t>();
  if (!n.is_floating_point()) return std::nullopt;
  const double v = *n.value<double>();
  if (!std::isfinite(v) || v != std::floor(v) || std::fabs(v) > 9.007199254740992e15) return std::nullopt;
  return static_cast<int64_t>(v);
}

// " (did you mean 'x'?)" for the closest known key or section, or "" when none is close: a small
// edit distance, or the same key name in another section.
std::string did_you_mean(const std::string& key, bool section) {
  std::vector<std::string> names;
  for (const auto& [k, f] : schema()) {
    const std::string name = section ? k.substr(0, k.find('.')) : k;
    if (names.empty() || names.back() != name) names.push_back(name);
  }
  std::string best;
  size_t best_d = std::string::npos;
  for (const auto& n : names) {
    size_t d = edit_distance(key, n);
    if (!section && leaf(n) == leaf(key)) d = std::min<size_t>(d, 1);
    if (d < best_d) best_d = d, best = n;
  }
  const size_t limit = std::max<size_t>(2, key.size() / 4);
  return best_d <= limit ? fmt::format(" (did you mean '{}'?)", best) : "";
}

std::string render(const toml::node& n) {
  if (n.is_floating_point()) return fmt::format("{}", *n.value<double>());  // shortest form: 0.0005, not 0.00050000000000000001
  std::ostringstream os;
  n.visit([&](auto&& v) { os << v; });
  return os.str();
}

// Checks one value against its field; `origin` says where it came from (file or --set).
void check_value(const std::string& key, const Field& f, const toml::node& n, const std::string& origin) {
  auto bad = [&](const std::string& expected) {
    throw ConfigError(fmt::format("config key '{}' = {} ({}): expected {}", key, render(n), origin, expected));
  };
  auto range = [&](double v) {
    if (std::isnan(v)) {
      if (!f.allow_nan) bad(fmt::format("{} in [{}, {}], not nan", kind_name(f.kind), f.lo, f.hi));
      return;
    }
    if (v < f.lo || v > f.hi) bad(fmt::format("{} in [{}, {}]", kind_name(f.kind), f.lo, f.hi));
  };
  switch (f.kind) {
    case Kind::Int: {
      const auto v = exact_integer(n);  // 1e6 is 1000000; 2.5 is not an integer
      if (!v) bad(kind_name(f.kind));
      range(double(*v));
      break;
    }
    case Kind::Float:
      if (!n.is_number()) bad(kind_name(f.kind));
      range(*n.value<double>());
      break;
    case Kind::String: {
      if (!n.is_string()) bad(kind_name(f.kind));
      if (!f.choices.empty()) {
        auto v = *n.value<std::string>();
        bool ok = false;
        for (auto& c : f.choices) ok |= (c == v);
        if (!ok) bad(fmt::format("one of \"{}\"", fmt::join(f.choices, "\", \"")));
      }
      break;
    }
    case Kind::Bool:
      if (!n.is_boolean()) bad(kind_name(f.kind));
      break;
    case Kind::IntList: {
      auto* arr = n.as_array();
      if (!arr || arr->empty()) bad("a non-empty list of integers");
      for (auto& e : *arr) {
        const auto i = exact_integer(e);
        if (!i) bad(kind_name(f.kind));
        double v = double(*i);
        if (v < f.lo || v > f.hi) bad(fmt::format("integers in [{}, {}]", f.lo, f.hi));
      }
      break;
    }
  }
}

}  // namespace mpirl::detail
