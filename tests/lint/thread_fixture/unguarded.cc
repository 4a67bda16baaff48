// Fixture for tools/check-thread-safety.py (tests/lint/check_thread_fixture.sh):
// Account is locked right except in the three places marked BAD, each of
// which the analysis must report; the rest (a MutexLock scope, a REQUIRES
// helper, a CondVar wait loop, AssertHeld) must pass without a word.
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

 private:
  void AddLocked(int n) REQUIRES(mu_) { balance_ += n; }
  mutable Mutex mu_;
  CondVar changed_;
  int balance_ GUARDED_BY(mu_) = 0;
};

}  // namespace kestrel
