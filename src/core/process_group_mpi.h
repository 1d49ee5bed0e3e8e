// The MPI process group (process_group_mpi.cc), built when CMake finds MPI (FERRY_HAVE_MPI).
#pragma once

#include <memory>

#include "ferry/core/process_group.h"

namespace ferry::detail {

/// MPI's world when this process was started by an MPI launcher (Open MPI's OMPI_COMM_WORLD_SIZE, PMIx's PMIX_RANK,
/// MPICH's PMI_SIZE) and ferry was built with MPI; nullptr otherwise.
std::shared_ptr<ProcessGroup> mpi_world_if_launched();
/// Whether ferry was built with MPI.
bool mpi_built() noexcept;

}  // namespace ferry::detail
