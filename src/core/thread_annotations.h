// Locking the compiler checks (STYLE.md rule 15): Clang's thread-safety
// analysis (-Wthread-safety, run by `scripts/lint.sh threads`) proves that
// state marked GUARDED_BY(mu_) is only touched with mu_ held, and that a
// function marked REQUIRES(mu_) is only called with it held. GCC ignores the
// attributes (every macro expands to nothing), so the build is unchanged.
//
// libstdc++'s std::mutex and std::lock_guard carry no annotations, so the
// analysis cannot see them lock anything: annotated code locks a
// Mutex through a MutexLock and waits on a CondVar.
//
//   class Counter {
//    public:
//     void Add() EXCLUDES(mu_) { MutexLock l(mu_); ++n_; }
//    private:
//     void AddLocked() REQUIRES(mu_) { ++n_; }
//     Mutex mu_;
//     int n_ GUARDED_BY(mu_) = 0;
//   };
//
// The attributes are Clang's (clang.llvm.org/docs/ThreadSafetyAnalysis.html).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define KESTREL_THREAD_ATTRIBUTE(x) __attribute__((x))
#else
#define KESTREL_THREAD_ATTRIBUTE(x)  // GCC: no thread-safety analysis
#endif

// On a class: its objects are a capability (a lock) named `x` in messages.
#define CAPABILITY(x) KESTREL_THREAD_ATTRIBUTE(capability(x))
// On an RAII class: constructing it acquires, destroying it releases.
#define SCOPED_CAPABILITY KESTREL_THREAD_ATTRIBUTE(scoped_lockable)
// On a member or global: read or written only with capability `x` held.
#define GUARDED_BY(x) KESTREL_THREAD_ATTRIBUTE(guarded_by(x))
// On a pointer member: what it points at is read or written only with `x` held
// (the pointer itself is not guarded).
#define PT_GUARDED_BY(x) KESTREL_THREAD_ATTRIBUTE(pt_guarded_by(x))
// On a capability: it is always acquired after / before the listed ones.
// (Checked only with -Wthread-safety-beta; written down for the reader.)
#define ACQUIRED_AFTER(...) KESTREL_THREAD_ATTRIBUTE(acquired_after(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) KESTREL_THREAD_ATTRIBUTE(acquired_before(__VA_ARGS__))
// On a function: the caller must hold the capabilities (exclusively / shared).
#define REQUIRES(...) KESTREL_THREAD_ATTRIBUTE(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) KESTREL_THREAD_ATTRIBUTE(requires_shared_capability(__VA_ARGS__))
// On a function: it acquires / releases the capabilities (none named: `this`).
#define ACQUIRE(...) KESTREL_THREAD_ATTRIBUTE(acquire_capability(__VA_ARGS__))
#define RELEASE(...) KESTREL_THREAD_ATTRIBUTE(release_capability(__VA_ARGS__))
// On a function: it acquires the capability when it returns `ret` (a try-lock).
#define TRY_ACQUIRE(...) KESTREL_THREAD_ATTRIBUTE(try_acquire_capability(__VA_ARGS__))
// On a function: the caller must not hold the capabilities (it takes them
// itself; holding one already would deadlock).
#define EXCLUDES(...) KESTREL_THREAD_ATTRIBUTE(locks_excluded(__VA_ARGS__))
// On a function: when it returns, the capability is held (checked at run time
// or known from the call path); the analysis takes it as held afterwards.
#define ASSERT_CAPABILITY(x) KESTREL_THREAD_ATTRIBUTE(assert_capability(x))
// On a function: it returns a reference to the capability `x` (a getter).
#define RETURN_CAPABILITY(x) KESTREL_THREAD_ATTRIBUTE(lock_returned(x))
// On a function: the analysis skips its body. Only with a comment saying why
// the locking is right all the same.
#define NO_THREAD_SAFETY_ANALYSIS KESTREL_THREAD_ATTRIBUTE(no_thread_safety_analysis)

namespace kestrel {

class CondVar;

// A std::mutex the analysis can see. Not recursive: locking it again on the
// same thread deadlocks, as std::mutex does. Lock it with MutexLock; Lock and
// Unlock are for the rare hand-over-hand case the scope cannot express.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // Tells the analysis the calling thread holds this mutex (a function that
  // is only ever called under it, where REQUIRES cannot be written, e.g. a
  // callback). Checks nothing at run time: std::mutex does not know its owner.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` from construction to the end of the scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RELEASE() { mu_.Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// A condition variable over a Mutex. Every wait requires the mutex
// held; it is released while waiting and held again on return. Waits may
// wake spuriously, so wait in a loop that tests the condition under the lock:
//
//   MutexLock l(mu_);
//   while (queue_.empty() && !stop_) cv_.Wait(mu_);
//
// (A predicate lambda would be analysed on its own, without the lock held,
// so the analysis would reject its reads of guarded state: write the loop.)
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Until notified (or a spurious wake-up).
  void Wait(Mutex& mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still locked: the caller's MutexLock unlocks it
  }
  // Until notified or `deadline` (a steady clock) passes; false on the
  // deadline, true otherwise (which may still be a spurious wake-up).
  bool WaitUntil(Mutex& mu, std::chrono::steady_clock::time_point deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const bool notified = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return notified;
  }
  // WaitUntil(now + timeout).
  bool WaitFor(Mutex& mu, std::chrono::steady_clock::duration timeout) REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout);
  }

  // Wakes one waiter / every waiter. The mutex need not be held.
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace kestrel
