// The look-ups every table of kinds shares (tasks, models, optimizers, schedules, tokenizers,
// initialisations): a table is a vector of rows, each with a `name` (its flag value) and, where
// code refers to a kind, an `id`. A kind is then found only here, by its row, never by comparing
// its name.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "autograd/format.h"

namespace gradlab {

// "a, b or c": the names of the rows, in table order.
template <class Row>
std::string names_of(const std::vector<Row>& rows) {
  std::vector<std::string> names;
  for (const Row& row : rows) names.emplace_back(row.name);
  return name_list(names);
}

// The row named `name`. Throws ConfigError "<context>unknown <kind> 'name' (expected a, b or
// c)" for any other name.
template <class Row>
const Row& row_named(const std::vector<Row>& rows, const std::string& name, const std::string& kind,
                     const std::string& context = "") {
  for (const Row& row : rows) {
    if (name == row.name) return row;
  }
  throw ConfigError(context + "unknown " + kind + " " + quote(name) + " (expected " +
                    names_of(rows) + ")");
}

// The row of `id`; every id has one, so a missing row is a bug in the table.
template <class Row, class Id>
const Row& row_of(const std::vector<Row>& rows, Id id) {
  for (const Row& row : rows) {
    if (row.id == id) return row;
  }
  throw std::logic_error("a kind without a row in its table");
}

}  // namespace gradlab
