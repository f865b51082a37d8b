#pragma once
// Builders that turn a struct member into a schema row: the member pointer
// gives both the getter and the setter, so the table cannot read one field
// and write another. Used by schema.cpp only.

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "config/schema.hpp"
#include "config/value_text.hpp"

namespace mpiaccel::detail {

struct IntRange {
  int64_t lo = std::numeric_limits<int64_t>::min();
  int64_t hi = std::numeric_limits<int64_t>::max();

  bool contains(int64_t v) const { return v >= lo && v <= hi; }
  std::string text() const {
    if (hi == std::numeric_limits<int64_t>::max()) return ">= " + std::to_string(lo);
    return std::to_string(lo) + ".." + std::to_string(hi);
  }
};

struct FloatRange {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;  ///< lo itself excluded
  bool hi_open = false;

  bool contains(double v) const {
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
  std::string text() const {
    std::string low = std::string(lo_open ? "> " : ">= ") + format_float(lo);
    if (std::isinf(hi)) return low;
    if (!lo_open && !hi_open) return format_float(lo) + ".." + format_float(hi);
    return low + " and " + (hi_open ? "< " : "<= ") + format_float(hi);
  }
};

inline IntRange at_least(int64_t lo) { return {lo}; }
inline IntRange between(int64_t lo, int64_t hi) { return {lo, hi}; }
inline FloatRange positive() { return {0.0, std::numeric_limits<double>::infinity(), true}; }
inline FloatRange non_negative() { return {0.0}; }
inline FloatRange fraction() { return {0.0, 1.0}; }                 ///< 0..1
inline FloatRange below_one() { return {0.0, 1.0, false, true}; }   ///< [0, 1)

/// Adds the rows of one section: `rows_of(rows, "ddp", &Config::ddp).real(...)`.
template <class S>
class SectionRows {
 public:
  SectionRows(std::vector<KeySpec>& rows, std::string name, S Config::*section)
      : rows_(rows), name_(std::move(name)), section_(section) {}

  SectionRows& flag(const char* key, bool S::*m, const char* help) {
    auto s = section_;
    add(key, "bool", "true|false|yes|no|on|off|1|0", help, {},
        [=](const Config& c) { return format_bool((c.*s).*m); },
        [=](Config& c, const std::string& text) -> std::string {
          std::string why;
          auto v = parse_bool(text, why);
          if (!v) return why;
          (c.*s).*m = *v;
          return "";
        });
    return *this;
  }

  SectionRows& integer(const char* key, int64_t S::*m, IntRange range, const char* help) {
    auto s = section_;
    add(key, "int", range.text(), help, {},
        [=](const Config& c) { return std::to_string((c.*s).*m); },
        [=](Config& c, const std::string& text) -> std::string {
          std::string why;
          auto v = parse_int(text, why);
          if (!v) return why;
          if (!range.contains(*v)) return text + " is out of range";
          (c.*s).*m = *v;
          return "";
        });
    return *this;
  }

  /// A size >= 1 or "auto" (stored as 0).
  SectionRows& size_or_auto(const char* key, int64_t S::*m, const char* help) {
    auto s = section_;
    add(key, "size", ">= 1|auto", help, {},
        [=](const Config& c) { return (c.*s).*m == 0 ? std::string("auto") : std::to_string((c.*s).*m); },
        [=](Config& c, const std::string& text) -> std::string {
          if (lower(text) == "auto") {
            (c.*s).*m = 0;
            return "";
          }
          std::string why;
          auto v = parse_int(text, why);
          if (!v) return why + "; accepted: a size >= 1 or auto";
          if (*v < 1) return text + " is out of range; accepted: a size >= 1 or auto";
          (c.*s).*m = *v;
          return "";
        });
    return *this;
  }

  SectionRows& real(const char* key, double S::*m, FloatRange range, const char* help) {
    auto s = section_;
    add(key, "float", range.text(), help, {},
        [=](const Config& c) { return format_float((c.*s).*m); },
        [=](Config& c, const std::string& text) -> std::string {
          std::string why;
          auto v = parse_float(text, why);
          if (!v) return why;
          if (!range.contains(*v)) return text + " is out of range";
          (c.*s).*m = *v;
          return "";
        });
    return *this;
  }

  SectionRows& pair(const char* key, std::array<double, 2> S::*m, FloatRange range,
                    const char* help) {
    auto s = section_;
    add(key, "float_pair", "two numbers 'a, b', each " + range.text(), help, {},
        [=](const Config& c) {
          const auto& v = (c.*s).*m;
          return format_float(v[0]) + ", " + format_float(v[1]);
        },
        [=](Config& c, const std::string& text) -> std::string {
          size_t comma = text.find(',');
          if (comma == std::string::npos || text.find(',', comma + 1) != std::string::npos) {
            return "'" + text + "' is not two comma-separated numbers";
          }
          std::array<double, 2> v{};
          std::string parts[2] = {trim(text.substr(0, comma)), trim(text.substr(comma + 1))};
          for (int i = 0; i < 2; ++i) {
            std::string why;
            auto x = parse_float(parts[i], why);
            if (!x) return why;
            if (!range.contains(*x)) return parts[i] + " is out of range";
            v[i] = *x;
          }
          (c.*s).*m = v;
          return "";
        });
    return *this;
  }

  /// Free text; `accepted` says what it means (e.g. "a path; empty = off").
  SectionRows& text(const char* key, std::string S::*m, bool allow_empty, const char* accepted,
                    const char* help) {
    auto s = section_;
    add(key, "string", accepted, help, {},
        [=](const Config& c) { return quote_if_needed((c.*s).*m); },
        [=](Config& c, const std::string& text) -> std::string {
          std::string why;
          auto v = unquote(text, why);
          if (!v) return why;
          if (!allow_empty && v->empty()) return "the value is empty";
          std::string unwritable = unwritable_reason(*v);
          if (!unwritable.empty()) return unwritable;
          // to_ini() must be able to write it back on one line inih reads whole.
          size_t line = std::string(key).size() + 3 + quote_if_needed(*v).size();
          if (line > kMaxIniLine) {
            return "text of " + std::to_string(v->size()) + " characters makes the line '" +
                   key + " = ...' longer than " + std::to_string(kMaxIniLine) + " characters";
          }
          (c.*s).*m = *v;
          return "";
        });
    return *this;
  }

  /// One of `choices`, matched case-insensitively and stored as spelled here.
  SectionRows& choice(const char* key, std::string S::*m, std::vector<std::string> choices,
                      const char* help) {
    auto s = section_;
    std::string accepted;
    for (const auto& x : choices) accepted += (accepted.empty() ? "" : "|") + x;
    add(key, "choice", accepted, help, choices,
        [=](const Config& c) { return (c.*s).*m; },
        [=](Config& c, const std::string& text) -> std::string {
          for (const auto& x : choices) {
            if (lower(x) == lower(text)) {
              (c.*s).*m = x;
              return "";
            }
          }
          std::string why = "'" + text + "' is not one of the choices";
          if (auto near = nearest(text, choices)) why += " (did you mean '" + *near + "'?)";
          return why;
        });
    return *this;
  }

  /// One value of the enum E, spelled as Choices<E> spells it (any case;
  /// an alias reads as its value, and to_ini() writes the value's first name).
  template <class E>
  SectionRows& choice(const char* key, E S::*m, const char* help) {
    auto s = section_;
    std::vector<std::string> names;
    for (const auto& c : Choices<E>::names) names.push_back(c.name);
    add(key, "choice", choice_names<E>(), help, names,
        [=](const Config& c) { return name_of((c.*s).*m); },
        [=](Config& c, const std::string& text) -> std::string {
          for (const auto& x : Choices<E>::names) {
            if (detail::same_choice_name(text, x.name)) {
              (c.*s).*m = x.value;
              return "";
            }
          }
          std::string why = "'" + text + "' is not one of the choices";
          if (auto near = nearest(text, names)) why += " (did you mean '" + *near + "'?)";
          return why;
        });
    return *this;
  }

 private:
  template <class Get, class Set>
  void add(const char* key, std::string type, std::string accepted, const char* help,
           std::vector<std::string> choices, Get get, Set set) {
    rows_.push_back(KeySpec{name_, key, std::move(type), std::move(accepted), help,
                            std::move(choices), std::move(get), std::move(set)});
  }

  std::vector<KeySpec>& rows_;
  std::string name_;
  S Config::*section_;
};

template <class S>
SectionRows<S> rows_of(std::vector<KeySpec>& rows, std::string name, S Config::*section) {
  return SectionRows<S>(rows, std::move(name), section);
}

}  // namespace mpiaccel::detail
