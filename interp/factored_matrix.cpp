// FactoredMatrix: products kept factored, and their norm, singular values and eigenvalues from
// the factors alone (small [R, R] or [K, K] problems, never the [M, N] product).
#include "interp/factored_matrix.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "autograd/error.h"

namespace gradlab::interp {
namespace {

std::string dims(int64_t rows, int64_t cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

std::string shape_of(const Eigen::MatrixXd& m) {
  return dims(m.rows(), m.cols());
}

void check_chain(const char* op, int64_t left_rows, int64_t left_cols, int64_t right_rows,
                 int64_t right_cols) {
  if (left_cols != right_rows) {
    throw ShapeError(std::string(op) + ": the columns of " + dims(left_rows, left_cols) +
                     " are not the rows of " + dims(right_rows, right_cols));
  }
}

// Q [rows, k] and R [k, cols] of the thin QR of m, k = min(rows, cols).
std::pair<Eigen::MatrixXd, Eigen::MatrixXd> thin_qr(const Eigen::MatrixXd& m) {
  const Eigen::Index k = std::min(m.rows(), m.cols());
  const Eigen::HouseholderQR<Eigen::MatrixXd> qr(m);
  Eigen::MatrixXd q = qr.householderQ() * Eigen::MatrixXd::Identity(m.rows(), k);
  Eigen::MatrixXd r = qr.matrixQR().topRows(k).triangularView<Eigen::Upper>();
  return {std::move(q), std::move(r)};
}

}  // namespace

FactoredMatrix::FactoredMatrix(Eigen::MatrixXd a, Eigen::MatrixXd b)
    : a_(std::move(a)), b_(std::move(b)) {
  if (a_.cols() != b_.rows()) {
    throw ShapeError("FactoredMatrix: A " + shape_of(a_) + " (M, R) and B " + shape_of(b_) +
                     " (R, N) differ in R");
  }
}

Eigen::MatrixXd FactoredMatrix::AB() const {
  return a_ * b_;
}

Eigen::MatrixXd FactoredMatrix::BA() const {
  if (rows() != cols()) {
    throw ShapeError("FactoredMatrix BA: the product A B is " + dims(rows(), cols()) +
                     ", not square");
  }
  return b_ * a_;
}

FactoredMatrix FactoredMatrix::transpose() const {
  return {b_.transpose(), a_.transpose()};
}

FactoredMatrix FactoredMatrix::operator*(const Eigen::MatrixXd& right) const {
  check_chain("FactoredMatrix @ matrix", rows(), cols(), right.rows(), right.cols());
  return {a_, b_ * right};
}

FactoredMatrix FactoredMatrix::operator*(const FactoredMatrix& right) const {
  check_chain("FactoredMatrix @ FactoredMatrix", rows(), cols(), right.rows(), right.cols());
  if (inner() <= right.inner()) return {a_, (b_ * right.a_) * right.b_};
  return {a_ * (b_ * right.a_), right.b_};
}

FactoredMatrix operator*(const Eigen::MatrixXd& left, const FactoredMatrix& right) {
  check_chain("matrix @ FactoredMatrix", left.rows(), left.cols(), right.rows(), right.cols());
  return {left * right.a_, right.b_};
}

double FactoredMatrix::norm() const {
  // trace(X Y) for symmetric X, Y is the sum of their elementwise product.
  const double squared = (a_.transpose() * a_).cwiseProduct(b_ * b_.transpose()).sum();
  return std::sqrt(std::max(squared, 0.0));
}

Svd FactoredMatrix::svd() const {
  const auto [qa, ra] = thin_qr(a_);
  const auto [qb, rb] = thin_qr(b_.transpose());
  const Eigen::JacobiSVD<Eigen::MatrixXd> core(ra * rb.transpose(),
                                               Eigen::ComputeThinU | Eigen::ComputeThinV);
  return {qa * core.matrixU(), core.singularValues(), qb * core.matrixV()};
}

Eigen::VectorXcd FactoredMatrix::eigenvalues() const {
  const Eigen::VectorXcd values = Eigen::EigenSolver<Eigen::MatrixXd>(BA(), false).eigenvalues();
  std::vector<Eigen::Index> order(static_cast<size_t>(values.size()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](Eigen::Index i, Eigen::Index j) {
    return std::abs(values[i]) > std::abs(values[j]);
  });
  Eigen::VectorXcd sorted(values.size());
  for (Eigen::Index i = 0; i < values.size(); ++i) sorted[i] = values[order[i]];
  return sorted;
}

FactoredMatrix FactoredMatrix::reduced(int64_t k) const {
  const Svd s = svd();
  if (k < 1 || k > s.S.size()) {
    throw ConfigError("FactoredMatrix reduced: rank " + std::to_string(k) + " is not in [1, " +
                      std::to_string(s.S.size()) + "]");
  }
  return {s.U.leftCols(k) * s.S.head(k).asDiagonal(), s.V.leftCols(k).transpose()};
}

}  // namespace gradlab::interp
