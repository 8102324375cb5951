// Decode workspaces shared by the calls of one ordo::Translator, which may come from
// several threads at once. A call borrows a workspace for its duration and gives it
// back, so consecutive calls reuse the buffers of earlier ones (their pages stay
// mapped) and concurrent calls never share one. The pool holds as many workspaces as
// calls ever ran at the same time.
#pragma once

#include <memory>
#include <new>
#include <mutex>
#include <vector>

#include "engine/search.h"

namespace ordo {

class WorkspacePool {
 public:
  // A borrowed workspace, returned to the pool when the lease ends.
  class Lease {
   public:
    Lease(WorkspacePool& pool, std::unique_ptr<DecodeWorkspace> workspace)
        : pool_(pool), workspace_(std::move(workspace)) {}
    ~Lease() { pool_.give_back(std::move(workspace_)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

    DecodeWorkspace& operator*() { return *workspace_; }

   private:
    WorkspacePool& pool_;
    std::unique_ptr<DecodeWorkspace> workspace_;
  };

  Lease borrow() {
    std::unique_ptr<DecodeWorkspace> workspace;
    {
      const std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        workspace = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    if (!workspace) workspace = std::make_unique<DecodeWorkspace>();
    return Lease(*this, std::move(workspace));
  }

 private:
  void give_back(std::unique_ptr<DecodeWorkspace> workspace) noexcept {
    const std::lock_guard lock(mutex_);
    try {
      idle_.push_back(std::move(workspace));
    } catch (const std::bad_alloc&) {
      // Out of memory: drop the workspace rather than keep it.
    }
  }

  std::mutex mutex_;
  std::vector<std::unique_ptr<DecodeWorkspace>> idle_;
};

}  // namespace ordo
