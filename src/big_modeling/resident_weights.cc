// copy_mapped_weights, lock_weights_in_ram (see include/ferry/big_modeling/resident_weights.h).
#include "ferry/big_modeling/resident_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "ferry/core/storage.h"

namespace ferry {
namespace {

template <class Fn>
void for_each_cpu_slot(const nn::Module& model, Fn fn) {
  for (const auto& [name, slot] : model.named_parameter_slots(/*recurse=*/true, /*remove_duplicate=*/true))
    if (slot->tensor.defined() && slot->tensor.device().is_cpu()) fn(*slot);
  for (const auto& [name, slot] : model.named_buffer_slots(/*recurse=*/true, /*remove_duplicate=*/true))
    if (slot->tensor.defined() && slot->tensor.device().is_cpu()) fn(*slot);
}

}  // namespace

std::size_t copy_mapped_weights(nn::Module& model) {
  std::size_t copied = 0;
  for_each_cpu_slot(model, [&](nn::TensorSlot& slot) {
    if (!slot.tensor.storage() || slot.tensor.storage()->kind() != Storage::Kind::MappedView) return;
    slot.tensor = slot.tensor.clone();
    copied += slot.tensor.nbytes();
  });
  return copied;
}

LockReport lock_weights_in_ram(const nn::Module& model) {
  LockReport report;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  std::set<std::pair<std::uintptr_t, std::uintptr_t>> ranges;  // page-aligned, each storage once
  for_each_cpu_slot(model, [&](nn::TensorSlot& slot) {
    if (slot.tensor.nbytes() == 0 || !slot.tensor.raw_data()) return;
    const auto begin = reinterpret_cast<std::uintptr_t>(slot.tensor.raw_data());
    ranges.emplace(begin / page * page, (begin + slot.tensor.nbytes() + page - 1) / page * page);
  });
  for (const auto& [begin, end] : ranges) {
    if (::mlock(reinterpret_cast<const void*>(begin), end - begin) == 0) {
      report.locked_bytes += end - begin;
    } else if (report.error.empty()) {
      report.error = std::string("mlock failed: ") + std::strerror(errno) +
                     (errno == ENOMEM || errno == EPERM
                          ? " (the locked-memory limit is too small: raise it, e.g. `ulimit -l unlimited`, or run "
                            "with CAP_IPC_LOCK)"
                          : "");
    }
  }
  return report;
}

}  // namespace ferry
