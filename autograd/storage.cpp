// Aligned allocation of tensor buffers.
#include "autograd/storage.h"

#include <new>

namespace gradlab {

constexpr std::align_val_t kAlignment{64};

Storage::Storage(size_t bytes)
    : data_(::operator new(bytes == 0 ? 1 : bytes, kAlignment)), bytes_(bytes) {}

Storage::~Storage() {
  ::operator delete(data_, kAlignment);
}

}  // namespace gradlab
