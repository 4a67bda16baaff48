// Fixture for tools/check-thread-safety.py (tests/lint/check_thread_fixture.sh):
// Account, Pipeline and the global counter are locked right except in the
// places marked BAD, each of which the analysis must report; the rest (a
// MutexLock scope, a REQUIRES helper, a CondVar wait loop, AssertHeld, state
// reached through a reference to an Impl, a guarded global) must pass without
// a word. The shapes are those of src/: a class with a private mutex
// (jobs/worker.h), a pimpl struct locked through `Impl& m` (data/loader.cc),
// a mutex-guarded global (data/text_render.cc); and a plain std::mutex,
// which the check reports because the analysis cannot see it.
#include "core/thread_annotations.h"

namespace kestrel {

class Account {
 public:
  void Deposit(int n) EXCLUDES(mu_) {
    MutexLock l(mu_);
    AddLocked(n);
    changed_.SignalAll();
  }
  int WaitForAtLeast(int n) EXCLUDES(mu_) {
    MutexLock l(mu_);
    while (balance_ < n) changed_.Wait(mu_);
    return balance_;
  }
  void Withdraw(int n) { balance_ -= n; }  // BAD: writes balance_ without mu_
  int Peek() const { return balance_; }    // BAD: reads balance_ without mu_
  void Bonus() { AddLocked(1); }           // BAD: calls AddLocked without mu_
  void OnCallbackUnderLock() {
    mu_.AssertHeld();  // the caller holds mu_ (what AssertHeld is for)
    ++balance_;
  }
  void DepositTwice(int n) EXCLUDES(mu_) {
    MutexLock l(mu_);
    Deposit(n);  // BAD: Deposit takes mu_ itself (would deadlock)
  }
  void Nap() { changed_.Wait(mu_); }  // BAD: waits without holding mu_

 private:
  void AddLocked(int n) REQUIRES(mu_) { balance_ += n; }
  mutable Mutex mu_;
  CondVar changed_;
  int balance_ GUARDED_BY(mu_) = 0;
};

struct Pipeline {
  Mutex mu;
  int next GUARDED_BY(mu) = 0;
};

int Claim(Pipeline& m) {
  MutexLock l(m.mu);
  return m.next++;
}

int PeekNext(Pipeline& m) { return m.next; }  // BAD: reads m.next without m.mu

Mutex g_mu;
int g_count GUARDED_BY(g_mu) = 0;

void Count() {
  MutexLock l(g_mu);
  ++g_count;
}

void Reset() { g_count = 0; }  // BAD: writes g_count without g_mu

// Code the analysis cannot see at all: what this mutex guards is unchecked.
struct Legacy {
  std::mutex mu;  // BAD: a plain std::mutex (use Mutex and GUARDED_BY)
  int n = 0;
};

}  // namespace kestrel
