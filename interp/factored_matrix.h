// A matrix kept as the product of two factors, A [M, R] B [R, N], as TransformerLens's
// FactoredMatrix: an attention head's W_QK and W_OV are [C, C] products through the head's D
// dimensions, and the full circuits [V, V] through it too, so that norms, singular values and
// eigenvalues are computed from the factors without forming the M x N product. Float64
// throughout: these are weights, analysed once.
#pragma once

#include <Eigen/Dense>
#include <cstdint>

namespace gradlab::interp {

// U [M, K] diag(S) V^T [K, N], S descending: a singular value decomposition of rank K.
struct Svd {
  Eigen::MatrixXd U;
  Eigen::VectorXd S;
  Eigen::MatrixXd V;
};

class FactoredMatrix {
 public:
  // Throws ShapeError naming both shapes when a's columns are not b's rows.
  FactoredMatrix(Eigen::MatrixXd a, Eigen::MatrixXd b);

  const Eigen::MatrixXd& A() const { return a_; }  // [M, R]
  const Eigen::MatrixXd& B() const { return b_; }  // [R, N]
  int64_t rows() const { return a_.rows(); }       // M
  int64_t cols() const { return b_.cols(); }       // N
  int64_t inner() const { return a_.cols(); }      // R

  Eigen::MatrixXd AB() const;  // the product [M, N], formed
  // B A [R, R], whose eigenvalues are the nonzero eigenvalues of A B (plus zeros when R > M).
  // Throws ShapeError unless M = N.
  Eigen::MatrixXd BA() const;
  FactoredMatrix transpose() const;  // B^T A^T [N, M]

  // The product with a matrix or another factored matrix, kept factored: the inner dimension
  // stays the smaller of the two. Throws ShapeError naming both shapes when they do not chain.
  FactoredMatrix operator*(const Eigen::MatrixXd& right) const;
  FactoredMatrix operator*(const FactoredMatrix& right) const;
  friend FactoredMatrix operator*(const Eigen::MatrixXd& left, const FactoredMatrix& right);

  // The Frobenius norm: sqrt(trace((A^T A)(B B^T))), from two [R, R] matrices.
  double norm() const;
  // Through thin QR decompositions A = Q_A R_A and B^T = Q_B R_B: A B = Q_A (R_A R_B^T) Q_B^T, so
  // the SVD of the small core R_A R_B^T gives A B's; K = min(M, N, R).
  Svd svd() const;
  Eigen::VectorXd singular_values() const { return svd().S; }  // [K], descending
  // The eigenvalues of B A [R], largest magnitude first: for M = N >= R, every nonzero
  // eigenvalue of A B. Throws ShapeError unless M = N.
  Eigen::VectorXcd eigenvalues() const;
  // The closest product of rank k (Frobenius and spectral): U_k diag(S_k) times V_k^T, inner
  // dimension k. Throws ConfigError unless 1 <= k <= K.
  FactoredMatrix reduced(int64_t k) const;

 private:
  Eigen::MatrixXd a_, b_;
};

}  // namespace gradlab::interp
