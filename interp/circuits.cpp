// Weight-based circuits: the heads' W_QK and W_OV read from the projections' weights (stored
// [out, in], so that a row vector x maps to x W^T), the full circuits, the copying score and
// the composition scores with their random baseline.
#include "interp/circuits.h"

#include <cmath>
#include <limits>
#include <set>

#include "autograd/error.h"
#include "autograd/random.h"
#include "nn/models.h"

namespace gradlab::interp {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A [rows, cols] tensor (float32 or float64) as a float64 matrix.
Eigen::MatrixXd matrix_of(const Tensor& t) {
  const std::vector<double> values = t.to_vector();
  return Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      values.data(), t.size(0), t.size(1));
}

// W_E and W_U of a built-in model kind; false for another model.
template <class Model>
bool read_embedding(const nn::SequenceModel& model, ModelCircuits& circuits) {
  const auto* m = dynamic_cast<const Model*>(&model);
  if (m == nullptr) return false;
  circuits.embedding = matrix_of(m->embed->token_embedding->weight);
  circuits.unembedding = m->head ? Eigen::MatrixXd(matrix_of(m->head->weight).transpose())
                                 : Eigen::MatrixXd(circuits.embedding.transpose());
  return true;
}

// The heads of one attention, in the row-vector convention: W_Q^h = (rows [hD, (h+1)D) of
// q_proj's weight)^T [C, D], likewise W_K^g and W_V^g of k_proj and v_proj, and W_O^h = (columns
// [hD, (h+1)D) of out_proj's weight)^T [D, C].
AttentionCircuits read_heads(const std::string& name, const nn::MultiHeadAttention& attention) {
  const int64_t H = attention.num_heads(), D = attention.head_dim();
  const int64_t group = H / attention.num_kv_heads();
  const Eigen::MatrixXd q = matrix_of(attention.q_proj->weight);    // [H*D, C]
  const Eigen::MatrixXd k = matrix_of(attention.k_proj->weight);    // [KV*D, C]
  const Eigen::MatrixXd v = matrix_of(attention.v_proj->weight);    // [KV*D, C]
  const Eigen::MatrixXd o = matrix_of(attention.out_proj->weight);  // [C, H*D]
  AttentionCircuits circuits;
  circuits.name = name;
  for (int64_t h = 0; h < H; ++h) {
    const int64_t g = h / group;
    circuits.qk.emplace_back(q.middleRows(h * D, D).transpose(), k.middleRows(g * D, D));
    circuits.ov.emplace_back(v.middleRows(g * D, D).transpose(),
                             o.middleCols(h * D, D).transpose());
  }
  return circuits;
}

void check_attention(const ModelCircuits& circuits, size_t attention, int64_t head) {
  if (attention >= circuits.attentions.size() || head < 0 || head >= circuits.heads) {
    throw ConfigError("circuits: attention " + std::to_string(attention) + " head " +
                      std::to_string(head) + " is not one of the model's " +
                      std::to_string(circuits.attentions.size()) + " attentions x " +
                      std::to_string(circuits.heads) + " heads");
  }
}

FactoredMatrix random_head(int64_t width, int64_t head_dim, Generator& gen) {
  Eigen::MatrixXd a(width, head_dim), b(head_dim, width);
  for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = gen.normal();
  for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = gen.normal();
  return {std::move(a), std::move(b)};
}

}  // namespace

ModelCircuits model_circuits(const nn::SequenceModel& model) {
  ModelCircuits circuits;
  if (!read_embedding<nn::DecoderLM>(model, circuits) &&
      !read_embedding<nn::EncoderDecoder>(model, circuits)) {
    throw ConfigError(
        "circuits: the model is neither a decoder-only nor an encoder-decoder model of gradlab's, "
        "so its token embedding and output head are unknown");
  }
  // The encoder-decoder's encoder self-attentions read and write the encoder's stream; its
  // cross-attentions read their keys and values there.
  std::set<const nn::MultiHeadAttention*> encoder, cross;
  if (const auto* m = dynamic_cast<const nn::EncoderDecoder*>(&model)) {
    for (const auto& block : m->encoder_blocks) encoder.insert(block->attn.get());
    for (const auto& block : m->decoder_blocks) cross.insert(block->cross_attn.get());
  }
  for (const auto& [name, module] : model.named_modules()) {
    const auto* attention = dynamic_cast<const nn::MultiHeadAttention*>(module);
    if (attention == nullptr) continue;
    AttentionCircuits heads = read_heads(name, *attention);
    if (encoder.contains(attention)) {
      heads.writes = heads.queries_read = heads.keys_read = Stream::Encoder;
    }
    if (cross.contains(attention)) heads.keys_read = Stream::Encoder;
    circuits.heads = attention->num_heads();
    circuits.head_dim = attention->head_dim();
    circuits.attentions.push_back(std::move(heads));
  }
  if (circuits.attentions.empty()) throw ConfigError("circuits: the model has no attention");
  return circuits;
}

FactoredMatrix full_ov_circuit(const ModelCircuits& circuits, size_t attention, int64_t head) {
  check_attention(circuits, attention, head);
  const FactoredMatrix& ov = circuits.attentions[attention].ov[static_cast<size_t>(head)];
  return circuits.embedding * ov * circuits.unembedding;
}

FactoredMatrix full_qk_circuit(const ModelCircuits& circuits, size_t attention, int64_t head) {
  check_attention(circuits, attention, head);
  const FactoredMatrix& qk = circuits.attentions[attention].qk[static_cast<size_t>(head)];
  return circuits.embedding * qk * Eigen::MatrixXd(circuits.embedding.transpose());
}

double copying_score(const FactoredMatrix& full_ov) {
  const Eigen::VectorXcd values = full_ov.eigenvalues();
  const double magnitude = values.cwiseAbs().sum();
  return magnitude > 0 ? values.sum().real() / magnitude : kNaN;
}

DiagonalRanks diagonal_ranks(const FactoredMatrix& square) {
  if (square.rows() != square.cols()) {
    throw ShapeError("diagonal ranks: the matrix is [" + std::to_string(square.rows()) + ", " +
                     std::to_string(square.cols()) + "], not square");
  }
  int64_t top = 0;
  double ranks = 0;
  for (Eigen::Index t = 0; t < square.rows(); ++t) {
    const Eigen::RowVectorXd row = square.A().row(t) * square.B();  // [V]
    int64_t above = 0;
    for (Eigen::Index j = 0; j < row.size(); ++j) above += j != t && row[j] >= row[t];
    top += above == 0;
    ranks += static_cast<double>(above + 1);
  }
  const double rows = static_cast<double>(square.rows());
  return {static_cast<double>(top) / rows, ranks / rows};
}

const char* composition_name(Composition kind) {
  switch (kind) {
    case Composition::Q:
      return "q";
    case Composition::K:
      return "k";
    case Composition::V:
      return "v";
  }
  return "";
}

FactoredMatrix reader_matrix(const AttentionCircuits& reader, int64_t head, Composition kind) {
  const size_t h = static_cast<size_t>(head);
  switch (kind) {
    case Composition::Q:
      return reader.qk.at(h);
    case Composition::K:
      return reader.qk.at(h).transpose();
    case Composition::V:
      return reader.ov.at(h);
  }
  return reader.ov.at(h);
}

double composition_score(const FactoredMatrix& writer_ov, const FactoredMatrix& reader) {
  const double norms = writer_ov.norm() * reader.norm();
  return norms > 0 ? (writer_ov * reader).norm() / norms : kNaN;
}

double composition_baseline(int64_t width, int64_t head_dim, Composition kind, int64_t draws,
                            uint64_t seed) {
  if (draws < 1) {
    throw ConfigError("composition baseline: " + std::to_string(draws) +
                      " draws; at least 1 is needed");
  }
  Generator gen(seed);
  double sum = 0;
  for (int64_t i = 0; i < draws; ++i) {
    const FactoredMatrix writer = random_head(width, head_dim, gen);
    const FactoredMatrix reader = random_head(width, head_dim, gen);
    sum += composition_score(writer, kind == Composition::K ? reader.transpose() : reader);
  }
  return sum / static_cast<double>(draws);
}

bool composes(const ModelCircuits& circuits, size_t a, size_t b, Composition kind) {
  const AttentionCircuits& reader = circuits.attentions.at(b);
  const Stream read = kind == Composition::Q ? reader.queries_read : reader.keys_read;
  return a < b && circuits.attentions.at(a).writes == read;
}

CircuitReport circuit_report(const nn::SequenceModel& model, const CircuitOptions& options) {
  const ModelCircuits circuits = model_circuits(model);
  const size_t L = circuits.attentions.size();
  const int64_t H = circuits.heads;
  CircuitReport report;
  report.heads = H;
  report.head_dim = circuits.head_dim;
  for (size_t l = 0; l < L; ++l) {
    const AttentionCircuits& attention = circuits.attentions[l];
    report.attentions.push_back(attention.name);
    for (int64_t h = 0; h < H; ++h) {
      const FactoredMatrix& ov = attention.ov[static_cast<size_t>(h)];
      const FactoredMatrix& qk = attention.qk[static_cast<size_t>(h)];
      report.ov_norm.push_back(ov.norm());
      report.qk_norm.push_back(qk.norm());
      const Eigen::VectorXd ov_values = ov.singular_values(), qk_values = qk.singular_values();
      report.ov_singular_values.insert(report.ov_singular_values.end(), ov_values.begin(),
                                       ov_values.end());
      report.qk_singular_values.insert(report.qk_singular_values.end(), qk_values.begin(),
                                       qk_values.end());
      const FactoredMatrix full = full_ov_circuit(circuits, l, h);
      report.copying_score.push_back(copying_score(full));
      const DiagonalRanks ranks = diagonal_ranks(full);
      report.diagonal_top1.push_back(ranks.top1);
      report.diagonal_mean_rank.push_back(ranks.mean_rank);
    }
  }
  const int64_t width = circuits.embedding.cols();
  for (size_t k = 0; k < kCompositions.size(); ++k) {
    const Composition kind = kCompositions[k];
    std::vector<double>& scores = report.composition[k];
    for (size_t a = 0; a < L; ++a) {
      for (int64_t ha = 0; ha < H; ++ha) {
        const FactoredMatrix& writer = circuits.attentions[a].ov[static_cast<size_t>(ha)];
        for (size_t b = 0; b < L; ++b) {
          for (int64_t hb = 0; hb < H; ++hb) {
            scores.push_back(
                composes(circuits, a, b, kind)
                    ? composition_score(writer, reader_matrix(circuits.attentions[b], hb, kind))
                    : kNaN);
          }
        }
      }
    }
    report.baseline[k] =
        composition_baseline(width, circuits.head_dim, kind, options.baseline_draws, options.seed);
  }
  return report;
}

}  // namespace gradlab::interp
