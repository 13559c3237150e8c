// Toy sequence tasks: determinism of the (seed, step) streams, per-task correctness checked
// against answers computed here from the prompt, the decoder-only and encoder-decoder batches,
// the held-out set, and configuration errors.
#include <gtest/gtest.h>

#include "tests/test_helpers.h"

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "data/sequence_task.h"
#include "nn/sequence_model.h"

namespace gradlab::data {
namespace test_data {

using Sequence = std::vector<int64_t>;
using nn::kIgnoreTarget;
using nn::SequenceBatch;

// The task's samples as the decoder-only and the encoder-decoder models read them.
SequenceBatch batch(const SequenceTask& task, uint64_t seed, int64_t step, int64_t size) {
  return nn::decoder_batch(task.samples(seed, step, size), task.prompt_length());
}
SequenceBatch heldout(const SequenceTask& task, uint64_t seed, int64_t count) {
  return nn::decoder_batch(task.heldout(seed, count), task.prompt_length());
}
SequenceBatch seq2seq_batch(const SequenceTask& task, uint64_t seed, int64_t step, int64_t size) {
  return nn::encoder_decoder_batch(task.samples(seed, step, size), task.prompt_length());
}
SequenceBatch seq2seq_heldout(const SequenceTask& task, uint64_t seed, int64_t count) {
  return nn::encoder_decoder_batch(task.heldout(seed, count), task.prompt_length());
}

std::shared_ptr<SequenceTask> make(const std::string& name, int64_t length, int64_t num_symbols) {
  TaskConfig c;
  c.name = name;
  c.sequence = {.length = length, .num_symbols = num_symbols};
  return make_sequence_task(c);
}

// The expected answer, written independently of the implementation.
Sequence reference_answer(const std::string& name, const Sequence& prompt) {
  if (name == "copy") return prompt;
  if (name == "reverse") return Sequence(prompt.rbegin(), prompt.rend());
  if (name == "sort") {
    Sequence s = prompt;
    std::sort(s.begin(), s.end());
    return s;
  }
  // recall: k1 v1 .. kn vn q
  const int64_t q = prompt.back();
  for (size_t i = 0; i + 2 < prompt.size(); i += 2) {
    if (prompt[i] == q) return {prompt[i + 1]};
  }
  ADD_FAILURE() << "query " << q << " is not a key";
  return {};
}

Sequence row(const Indices& a, int64_t r) {
  const int64_t width = a.shape[1];
  return Sequence(a.values.begin() + r * width, a.values.begin() + (r + 1) * width);
}

// Sample r rebuilt from the decoder-only batch: the inputs plus the last target.
Sequence sample_of(const SequenceBatch& b, int64_t r) {
  Sequence s = row(b.inputs, r);
  s.push_back(row(b.targets, r).back());
  return s;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError thrown";
  return "";
}

using testing::contains;

const std::vector<std::string> kTasks = {"copy", "reverse", "sort", "recall"};

TEST(Task, Lengths) {
  const auto copy = make("copy", 10, 10);
  EXPECT_EQ(copy->prompt_length(), 10);
  EXPECT_EQ(copy->answer_length(), 10);
  EXPECT_EQ(copy->sample_length(), 21);
  EXPECT_EQ(copy->vocab_size(), 12);
  EXPECT_EQ(copy->padding(), 11);
  const auto recall = make("recall", 4, 8);
  EXPECT_EQ(recall->prompt_length(), 9);  // 4 pairs and the query
  EXPECT_EQ(recall->answer_length(), 1);
  EXPECT_EQ(recall->sample_length(), 11);
}

TEST(Task, CopyLength10BatchLayout) {
  const auto task = make("copy", 10, 10);
  const SequenceBatch b = batch(*task, 7, 0, 3);
  EXPECT_EQ(b.inputs.shape, (Shape{3, 20}));
  EXPECT_EQ(b.targets.shape, (Shape{3, 20}));
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t t = 0; t < 20; ++t) {
      const size_t i = static_cast<size_t>(r * 20 + t);
      EXPECT_EQ(b.targets.values[i] != kIgnoreTarget, t >= 10) << "row " << r << " position " << t;
      if (t < 10) {
        EXPECT_EQ(b.targets.values[i], kIgnoreTarget);
      }
    }
    EXPECT_EQ(b.inputs.values[static_cast<size_t>(r * 20 + 10)], kSeparator);
  }
}

TEST(Task, SampleDrawsSymbolsWithBelow) {
  const auto task = make("copy", 6, 9);
  Generator gen(123), manual(123);
  const Sequence s = task->sample(gen);
  Sequence prompt;
  for (int i = 0; i < 6; ++i) prompt.push_back(static_cast<int64_t>(manual.below(9)) + 1);
  Sequence expected = prompt;
  expected.push_back(kSeparator);
  expected.insert(expected.end(), prompt.begin(), prompt.end());
  EXPECT_EQ(s, expected);
  EXPECT_EQ(gen.state(), manual.state());  // nothing else is drawn
}

TEST(Task, BatchesCorrectForEveryTask) {
  for (const std::string& name : kTasks) {
    SCOPED_TRACE(name);
    const auto task = make(name, 5, 7);
    const int64_t B = 64;
    const int64_t T = task->sample_length() - 1;
    const int64_t P = task->prompt_length();
    const SequenceBatch b = batch(*task, 11, 3, B);
    ASSERT_EQ(b.inputs.shape, (Shape{B, T}));
    ASSERT_EQ(b.targets.shape, (Shape{B, T}));
    for (int64_t r = 0; r < B; ++r) {
      const Sequence s = sample_of(b, r);
      const Sequence prompt(s.begin(), s.begin() + P);
      const Sequence answer(s.begin() + P + 1, s.end());
      EXPECT_EQ(s[static_cast<size_t>(P)], kSeparator);
      for (int64_t v : prompt) EXPECT_TRUE(v >= 1 && v <= 7) << v;
      for (int64_t v : answer) EXPECT_TRUE(v >= 1 && v <= 7) << v;
      EXPECT_EQ(answer, reference_answer(name, prompt));
      EXPECT_EQ(task->answer(prompt), answer);
      const Sequence targets = row(b.targets, r);
      int64_t counted = 0;
      for (int64_t t = 0; t < T; ++t) {
        const bool in_answer = t >= P;  // target s[t + 1] lies after the separator
        const int64_t expected = in_answer ? s[static_cast<size_t>(t + 1)] : kIgnoreTarget;
        EXPECT_EQ(targets[static_cast<size_t>(t)], expected) << "row " << r << " t " << t;
        counted += targets[static_cast<size_t>(t)] != kIgnoreTarget;
      }
      EXPECT_EQ(counted, task->answer_length());
    }
  }
}

TEST(Task, RecallKeysDistinctAndQueryAmongKeys) {
  const auto task = make("recall", 6, 6);  // keys are a permutation of 1..6
  const SequenceBatch b = batch(*task, 5, 0, 200);
  std::set<int64_t> query_slots;
  for (int64_t r = 0; r < 200; ++r) {
    const Sequence s = sample_of(b, r);
    ASSERT_EQ(s.size(), 15u);  // 6 pairs, query, SEP, value
    std::set<int64_t> keys;
    for (size_t i = 0; i < 12; i += 2) keys.insert(s[i]);
    EXPECT_EQ(keys, (std::set<int64_t>{1, 2, 3, 4, 5, 6}));
    const int64_t q = s[12];
    size_t slot = 0;  // the key position holding the query
    while (slot < 12 && s[slot] != q) slot += 2;
    ASSERT_LT(slot, 12u) << "query is not a key";
    query_slots.insert(static_cast<int64_t>(slot));
    EXPECT_EQ(s[13], kSeparator);
    EXPECT_EQ(s[14], s[slot + 1]);
  }
  EXPECT_EQ(query_slots.size(), 6u);  // every pair gets queried
}

TEST(Task, EverySymbolIsDrawn) {
  const auto task = make("copy", 8, 9);
  const SequenceBatch b = batch(*task, 1, 0, 100);
  std::set<int64_t> seen(b.inputs.values.begin(), b.inputs.values.end());
  EXPECT_EQ(seen, (std::set<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));  // never the padding
}

TEST(Task, BatchesAreAPureFunctionOfSeedAndStep) {
  const auto task = make("reverse", 8, 10);
  const SequenceBatch a3 = batch(*task, 42, 3, 16);
  const SequenceBatch a1 = batch(*task, 42, 1, 16);
  // Other order, with unrelated calls in between.
  const auto other = make("reverse", 8, 10);
  const SequenceBatch b1 = batch(*other, 42, 1, 16);
  batch(*other, 42, 9, 4);
  heldout(*other, 42, 5);
  const SequenceBatch b3 = batch(*other, 42, 3, 16);
  EXPECT_EQ(a1.inputs, b1.inputs);
  EXPECT_EQ(a1.targets, b1.targets);
  EXPECT_EQ(a3.inputs, b3.inputs);
  EXPECT_EQ(a3.targets, b3.targets);

  EXPECT_NE(a1.inputs, a3.inputs);                                      // different step
  EXPECT_NE(batch(*task, 43, 3, 16).inputs, a3.inputs);                 // different seed
  EXPECT_NE(batch(*task, 42, 4, 16).inputs, a3.inputs);                 // neighbouring step
  EXPECT_EQ(row(batch(*task, 42, 3, 4).inputs, 2), row(a3.inputs, 2));  // rows drawn in order
}

TEST(Task, HeldoutIsFixedAndSeparateFromTraining) {
  const auto task = make("sort", 6, 10);
  const SequenceBatch h = heldout(*task, 9, 512);
  EXPECT_EQ(h.inputs.shape, (Shape{512, 12}));
  EXPECT_EQ(heldout(*task, 9, 512).inputs, h.inputs);
  EXPECT_EQ(row(heldout(*task, 9, 10).inputs, 9), row(h.inputs, 9));  // prefix-stable
  EXPECT_NE(heldout(*task, 10, 512).inputs, h.inputs);

  std::multiset<Sequence> held, train;
  for (int64_t r = 0; r < 512; ++r) held.insert(sample_of(h, r));
  for (int64_t step = 0; step < 4; ++step) {
    const SequenceBatch b = batch(*task, 9, step, 512);
    train.clear();
    for (int64_t r = 0; r < 512; ++r) train.insert(sample_of(b, r));
    EXPECT_NE(held, train) << "step " << step;
    EXPECT_NE(row(b.inputs, 0), row(h.inputs, 0)) << "step " << step;
  }
}

TEST(Task, Seq2SeqViewMatchesDecoderView) {
  for (const std::string& name : kTasks) {
    SCOPED_TRACE(name);
    const auto task = make(name, 4, 9);
    const int64_t P = task->prompt_length(), A = task->answer_length(), n = 32;
    const SequenceBatch d = heldout(*task, 3, n);
    const SequenceBatch s = seq2seq_heldout(*task, 3, n);
    ASSERT_EQ(s.source.shape, (Shape{n, P}));
    ASSERT_EQ(s.inputs.shape, (Shape{n, A}));
    ASSERT_EQ(s.targets.shape, (Shape{n, A}));
    for (int64_t r = 0; r < n; ++r) {
      const Sequence sample = sample_of(d, r);
      const Sequence prompt(sample.begin(), sample.begin() + P);
      const Sequence answer(sample.begin() + P + 1, sample.end());
      EXPECT_EQ(row(s.source, r), prompt);
      EXPECT_EQ(row(s.targets, r), answer);
      Sequence shifted = {kSeparator};
      shifted.insert(shifted.end(), answer.begin(), answer.end() - 1);
      EXPECT_EQ(row(s.inputs, r), shifted);
      EXPECT_EQ(answer, reference_answer(name, prompt));
    }
    const SequenceBatch db = batch(*task, 3, 2, 8);
    const SequenceBatch sb = seq2seq_batch(*task, 3, 2, 8);
    for (int64_t r = 0; r < 8; ++r) {
      const Sequence sample = sample_of(db, r);
      EXPECT_EQ(row(sb.source, r), Sequence(sample.begin(), sample.begin() + P));
      EXPECT_EQ(row(sb.targets, r), Sequence(sample.begin() + P + 1, sample.end()));
    }
  }
}

TEST(Task, LengthOneCopy) {
  const auto task = make("copy", 1, 5);
  EXPECT_EQ(task->sample_length(), 3);
  const SequenceBatch b = batch(*task, 0, 0, 20);
  ASSERT_EQ(b.inputs.shape, (Shape{20, 2}));
  for (int64_t r = 0; r < 20; ++r) {
    const Sequence in = row(b.inputs, r), tg = row(b.targets, r);
    EXPECT_TRUE(in[0] >= 1 && in[0] <= 5);
    EXPECT_EQ(in[1], kSeparator);
    EXPECT_EQ(tg, (Sequence{kIgnoreTarget, in[0]}));
  }
  const SequenceBatch s = seq2seq_batch(*task, 0, 0, 20);
  EXPECT_EQ(s.source, s.targets);
  EXPECT_EQ(s.inputs.values, Sequence(20, kSeparator));
}

TEST(Task, AnswerAndValidatePrompt) {
  EXPECT_EQ(make("reverse", 3, 5)->answer({1, 2, 5}), (Sequence{5, 2, 1}));
  EXPECT_EQ(make("sort", 4, 5)->answer({3, 1, 3, 2}), (Sequence{1, 2, 3, 3}));
  const auto recall = make("recall", 3, 5);
  EXPECT_EQ(recall->answer({4, 2, 1, 5, 3, 5, 1}), (Sequence{5}));
  EXPECT_EQ(recall->answer({4, 2, 1, 5, 3, 5, 4}), (Sequence{2}));
  EXPECT_TRUE(contains(message_of([&] { recall->validate_prompt({4, 2, 1}); }), "3 tokens"));
  EXPECT_TRUE(contains(message_of([&] {
                         recall->validate_prompt({4, 2, 4, 5, 3, 5, 4});
                       }),
                       "repeats key 4"));
  EXPECT_TRUE(contains(message_of([&] {
                         recall->validate_prompt({4, 2, 1, 5, 3, 5, 2});
                       }),
                       "query 2"));
  EXPECT_TRUE(contains(message_of([&] { make("copy", 2, 5)->validate_prompt({1, 6}); }), "6"));
  EXPECT_TRUE(contains(message_of([&] { make("copy", 2, 5)->validate_prompt({0, 1}); }), "0"));
}

TEST(Task, ConfigErrorsNameTheField) {
  EXPECT_EQ(message_of([] { make("xyz", 3, 3); }),
            "task: unknown task 'xyz' (expected copy, reverse, sort, recall, modular, mqar, "
            "induction, text or tms)");
  EXPECT_TRUE(contains(message_of([] { make("copy", 0, 3); }), "length"));
  EXPECT_TRUE(contains(message_of([] { make("copy", 0, 3); }), "0"));
  EXPECT_TRUE(contains(message_of([] { make("sort", 3, 0); }), "--symbols"));
  const std::string recall = message_of([] { make("recall", 5, 3); });
  EXPECT_TRUE(contains(recall, "--symbols")) << recall;
  EXPECT_TRUE(contains(recall, "length")) << recall;
  EXPECT_NO_THROW(make("recall", 3, 3));
  const auto task = make("copy", 2, 3);
  EXPECT_TRUE(contains(message_of([&] { batch(*task, 0, 0, 0); }), "batch_size"));
  EXPECT_TRUE(contains(message_of([&] { batch(*task, 0, -1, 2); }), "step"));
  EXPECT_TRUE(contains(message_of([&] { heldout(*task, 0, 0); }), "count"));
}

}  // namespace test_data
}  // namespace gradlab::data
