// Storage over a buffer someone else owns (a numpy array's, in Python): tensors share it, writes
// change the version, and the owner is released exactly once, when the last handle goes, never
// into the pool.
#include <gtest/gtest.h>

#include <memory>
#include <new>
#include <string>

#include "autograd/error.h"
#include "autograd/storage.h"
#include "autograd/tensor.h"

namespace gradlab {
namespace test_foreign_storage {

constexpr std::align_val_t kAlign{Storage::kAlignment};

// An aligned buffer of n floats and an owner that frees it and counts its releases.
struct Owned {
  explicit Owned(size_t n, int* releases)
      : data(static_cast<float*>(::operator new(n * sizeof(float), kAlign))),
        owner(data, [releases](void* p) {
          ++*releases;
          ::operator delete(p, kAlign);
        }) {}
  float* data;
  std::shared_ptr<void> owner;
};

TEST(ForeignStorage, TensorsShareTheBufferAndTheLastOneReleasesItsOwnerOnce) {
  int releases = 0;
  Owned owned(6, &releases);
  float* const buffer = owned.data;
  const size_t cached_before = storage_stats().cached_bytes;
  auto storage = std::make_shared<Storage>(buffer, 6 * sizeof(float), std::move(owned.owner));
  Tensor t = Tensor::from_storage(std::move(storage), {2, 3}, DType::Float32);
  Tensor view = t.detach();

  buffer[4] = 5.0f;  // the owner's writes are the tensor's values
  EXPECT_EQ(t.data<float>(), buffer);
  EXPECT_EQ(view.at({1, 1}), 5.0);
  const uint64_t before_write = t.version();
  t.mutable_data<float>()[0] = 7.0f;
  EXPECT_NE(t.version(), before_write);
  EXPECT_EQ(view.version(), t.version());
  EXPECT_EQ(buffer[0], 7.0f);

  t = Tensor();
  EXPECT_EQ(releases, 0);  // the view still holds the storage
  view = Tensor();
  EXPECT_EQ(releases, 1);
  EXPECT_EQ(storage_stats().cached_bytes, cached_before);  // the pool never saw the buffer
}

TEST(ForeignStorage, RefusesAMisalignedOrOwnerlessBufferAndAShapeItCannotHold) {
  int releases = 0;
  Owned owned(32, &releases);
  try {
    Storage misaligned(owned.data + 1, 4 * sizeof(float), owned.owner);
    FAIL() << "a misaligned buffer was wrapped";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("64-byte aligned, its address is 4 bytes past"),
              std::string::npos)
        << e.what();
  }
  try {
    Storage ownerless(owned.data, 4 * sizeof(float), nullptr);
    FAIL() << "a buffer without an owner was wrapped";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs an owner"), std::string::npos) << e.what();
  }
  auto storage = std::make_shared<Storage>(owned.data, 6 * sizeof(float), owned.owner);
  try {
    Tensor::from_storage(storage, {2, 4}, DType::Float32);
    FAIL() << "8 floats over 24 bytes";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("24 bytes of storage do not hold shape [2,4]"),
              std::string::npos)
        << e.what();
  }
  storage.reset();
  owned.owner.reset();
  EXPECT_EQ(releases, 1);
}

}  // namespace test_foreign_storage
}  // namespace gradlab
