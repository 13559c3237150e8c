// The checks save and load share (checks.h).
#include "train/io/checkpoint_checks.h"

#include <map>
#include <set>

#include "autograd/format.h"
#include "io/hdf5/errors.h"
#include "io/hdf5/types.h"

namespace gradlab::train::hdf5 {

namespace {

void check_tensor(const std::string& path, const std::string& item, const Tensor& tensor) {
  if (!tensor.defined()) fail(path, item, "undefined tensor");
  if (tensor.rank() > kMaxRank) {
    fail(path, item, "rank " + std::to_string(tensor.rank()) + " exceeds the limit of 8");
  }
  if (static_cast<hsize_t>(tensor.numel()) > kMaxElements) {
    fail(path, item, "more than 2^28 elements");
  }
}

// Model names are single links ("blocks.0.ln1.weight"); optimizer state names are
// "<parameter>/<slot>", a group and a link inside it.
void check_tensor_name(const std::string& path, const std::string& item, const std::string& name,
                       bool with_slot) {
  const size_t slash = name.find('/');
  const bool valid = with_slot
                         ? slash != std::string::npos && is_link_name(name.substr(0, slash)) &&
                               is_link_name(name.substr(slash + 1))
                         : is_link_name(name);
  if (!valid) {
    fail(path, item,
         with_slot ? "name is not '<parameter>/<slot>'" : "name is empty or contains '/'");
  }
}

void check_tensors(const std::string& path, const std::string& group,
                   const std::vector<nn::NamedTensor>& tensors, bool with_slots) {
  std::set<std::string> seen;
  for (const auto& [name, tensor] : tensors) {
    const std::string item = group + "/" + name;
    check_tensor_name(path, item, name, with_slots);
    if (!seen.insert(name).second) fail(path, item, "duplicate name");
    check_tensor(path, item, tensor);
  }
}

}  // namespace

void check_step(const std::string& path, const std::string& item, int64_t step) {
  if (step < 0) fail(path, item, "step " + std::to_string(step) + " is negative");
}

void check_savable(const std::string& path, const CheckpointData& data) {
  std::set<std::string> seen;
  for (const auto& entry : data.config) {
    const std::string item = attr_item("/config", entry.first);
    if (entry.first.empty()) fail(path, item, "empty name");
    if (!seen.insert(entry.first).second) fail(path, item, "duplicate name");
    const auto* text = std::get_if<std::string>(&entry.second);
    if (text && text->find('\0') != std::string::npos) fail(path, item, "string contains NUL");
  }
  check_tensors(path, kModelGroup, data.model, false);
  check_tensors(path, kOptimizerGroup, data.optimizer_state, true);
  check_step(path, attr_item(kOptimizerGroup, "step"), data.optimizer_step);
  check_step(path, attr_item("/train", "step"), data.train.step);
  check_step(path, attr_item("/train", "best_step"), data.train.best_step);
}

void check_matching(const std::string& path, const char* group,
                    const std::vector<std::pair<std::string, Shape>>& stored,
                    const std::vector<nn::NamedTensor>& live) {
  const std::string owner = std::string("the ") + (group[0] == '/' ? group + 1 : group);
  std::map<std::string, Shape> by_name(stored.begin(), stored.end());
  for (const auto& [name, tensor] : live) {
    const std::string item = std::string(group) + "/" + name;
    if (!tensor.defined()) fail(path, item, "the live tensor is undefined");
    const auto found = by_name.find(name);
    if (found == by_name.end()) fail(path, item, "missing from the checkpoint");
    if (found->second != tensor.shape()) {
      fail(path, item,
           "shape " + gradlab::to_string(found->second) + " does not match " + owner + "'s " +
               gradlab::to_string(tensor.shape()));
    }
    by_name.erase(found);
  }
  for (const auto& entry : stored) {
    if (by_name.contains(entry.first)) {
      fail(path, std::string(group) + "/" + entry.first, "unexpected: not in " + owner);
    }
  }
}

int64_t step_attr(const std::string& path, const H5::H5Object& object,
                  const std::string& object_path, const std::string& name) {
  const int64_t step = integer_attr<int64_t>(path, object, object_path, name);
  check_step(path, attr_item(object_path, name), step);
  return step;
}
}  // namespace gradlab::train::hdf5
