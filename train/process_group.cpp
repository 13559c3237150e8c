// The group of one, and MPI_COMM_WORLD when the build has MPI (GRADLAB_HAVE_MPI).
#include "train/process_group.h"

#include <cstdlib>
#include <limits>
#include <memory>
#include <stdexcept>

#if GRADLAB_HAVE_MPI
// MPI's C interface only: the C++ bindings are deprecated and need a library of their own.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace gradlab::train {
namespace {

// The number of processes mpirun started, read from the launcher's environment (Open MPI's, or
// the PMI variables of other launchers); 0 when this process was not started by one.
int launched_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* value = std::getenv(name)) return std::max(1, std::atoi(value));
  }
  return 0;
}

#if GRADLAB_HAVE_MPI

// MPI takes int counts: a longer buffer goes in pieces.
constexpr size_t kMaxCount = std::numeric_limits<int>::max();

class MpiWorld : public ProcessGroup {
 public:
  MpiWorld(int* argc, char*** argv) {
    int provided = 0;
    // Only the main thread calls MPI; OpenMP's threads never do.
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiWorld() override { MPI_Finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void sum(std::span<float> values) override {
    all_reduce(values.data(), values.size(), MPI_FLOAT);
  }
  void sum(std::span<double> values) override {
    all_reduce(values.data(), values.size(), MPI_DOUBLE);
  }
  std::vector<uint64_t> gather(uint64_t value) override {
    std::vector<uint64_t> all(static_cast<size_t>(size_));
    MPI_Allgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
    return all;
  }
  std::vector<std::string> gather_text(const std::string& text) override {
    const std::vector<uint64_t> lengths = gather(text.size());
    std::vector<int> counts, offsets;
    int total = 0;
    for (uint64_t length : lengths) {
      offsets.push_back(total);
      counts.push_back(static_cast<int>(length));
      total += counts.back();
    }
    std::string joined(static_cast<size_t>(total), '\0');
    MPI_Allgatherv(text.data(), static_cast<int>(text.size()), MPI_CHAR, joined.data(),
                   counts.data(), offsets.data(), MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> all;
    for (size_t i = 0; i < lengths.size(); ++i) all.push_back(joined.substr(offsets[i], counts[i]));
    return all;
  }
  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
  }

 private:
  static void all_reduce(void* data, size_t count, MPI_Datatype type) {
    int type_size = 0;
    MPI_Type_size(type, &type_size);
    auto* bytes = static_cast<char*>(data);
    for (size_t done = 0; done < count;) {
      const size_t piece = std::min(kMaxCount, count - done);
      MPI_Allreduce(MPI_IN_PLACE, bytes + done * type_size, static_cast<int>(piece), type, MPI_SUM,
                    MPI_COMM_WORLD);
      done += piece;
    }
  }

  int rank_ = 0, size_ = 1;
};

#endif

std::unique_ptr<ProcessGroup>& world_slot() {
  static std::unique_ptr<ProcessGroup> group = std::make_unique<ProcessGroup>();
  return group;
}

}  // namespace

void ProcessGroup::abort(int exit_code) {
  std::exit(exit_code);
}

bool ProcessGroup::any(bool flag) {
  double value = flag ? 1 : 0;
  sum(std::span<double>(&value, 1));
  return value > 0;
}

ProcessGroup& world() {
  return *world_slot();
}

void join_world([[maybe_unused]] int* argc, [[maybe_unused]] char*** argv) {
  const int size = launched_size();
  if (size == 0) return;
#if GRADLAB_HAVE_MPI
  world_slot() = std::make_unique<MpiWorld>(argc, argv);
#else
  if (size > 1) {
    throw std::runtime_error(
        "started as one of " + std::to_string(size) +
        " processes, but this gradlab was built without MPI (configure with -DGRADLAB_MPI=ON "
        "and Open MPI installed)");
  }
#endif
}

bool built_with_mpi() {
#if GRADLAB_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::string rank_label(const ProcessGroup& group) {
  if (group.size() == 1) return "";
  return "rank " + std::to_string(group.rank()) + " of " + std::to_string(group.size());
}

}  // namespace gradlab::train
