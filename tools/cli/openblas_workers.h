// Debian's OpenBLAS (the pthread build) starts a worker thread per core as it loads, and
// each worker allocates its 128 MB buffer at once. Under a memory limit that leaves less
// (ulimit -v 100000, ulimit -d 40000) the allocation fails and OpenBLAS 0.3.21 retries
// forever (OpenBLAS issue #5289): even `ordo --version` printed its line and then spun at
// 100% of a core, its exit joining that worker. ordo never uses those workers: it splits
// products across its own threads and runs OpenBLAS single-threaded
// (engine/thread_pool.h), and engine/blas.cpp checks the room for the buffer of each of
// ordo's threads before its first product.
#pragma once

namespace ordo::tools {

// Under an address-space or data limit, when OPENBLAS_NUM_THREADS is not 1 already, runs
// this program again (the same arguments) with OPENBLAS_NUM_THREADS=1, so that OpenBLAS
// starts no workers. The variable must be set before OpenBLAS loads, and it loads before
// main: a setenv here, or in a preinit function (glibc resets the environment after
// those), comes too late. Without a limit, or if the program cannot be found again
// (/proc/self/exe), it returns and ordo runs as it is. Call first in main.
void restart_without_openblas_workers(char** argv);

}  // namespace ordo::tools
