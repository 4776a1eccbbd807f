/* kairos user API (C and C++). Link libkairos-user.so (CMake: kairos::user).
 *
 * Without the kairos runtime loaded, every call is a no-op that costs a load and a branch. Under
 * `kairos-run -- ./app`, calls reach the runtime: regions are measured with KAIROS_COMPONENTS and
 * appear, nested as they were pushed, in the report written at exit.
 *
 *   kairos_push_region("solve");  ...  kairos_pop_region("solve");
 *   { kairos::scoped_region region{"solve"}; ... }           // C++
 *
 * Names are copied when a region is first seen; the pointer need not outlive the call.
 * A pop whose name is not the innermost open region of the thread is reported on stderr
 * ("[kairos] ...") and ignored; it never stops the program. */
#ifndef KAIROS_USER_H
#define KAIROS_USER_H

#ifdef __cplusplus
extern "C" {
#endif

/* Opens a region on the calling thread. */
void kairos_push_region(const char* name);
/* Closes the innermost open region of the calling thread, which must be `name`. */
void kairos_pop_region(const char* name);

/* Collection on (the default) or off for the whole process. */
void kairos_start(void);
void kairos_stop(void);

/* Collection off or back on for the calling thread only. */
void kairos_disable_thread(void);
void kairos_enable_thread(void);

/* 1 when the kairos runtime is loaded and collecting, else 0. */
int kairos_is_active(void);

/* Progress points, for causal profiling (kairos-causal; docs/causal.md): where a unit of the work
 * whose speed matters completes (throughput), or where one enters and leaves (latency: the time
 * between is what should shrink). A point is known by its name's address from the first call on,
 * like a call site: pass a string literal, or a string that lives as long as the program.
 * Without kairos-causal they only count. Programs annotated with coz.h need no change. */
void kairos_progress(const char* name);
void kairos_progress_begin(const char* name);
void kairos_progress_end(const char* name);

#ifdef __cplusplus
} /* extern "C" */

namespace kairos {

/* A region open for the lifetime of the object. */
class scoped_region {
 public:
  explicit scoped_region(const char* name) noexcept : name_{name} { kairos_push_region(name_); }
  ~scoped_region() { kairos_pop_region(name_); }
  scoped_region(const scoped_region&) = delete;
  scoped_region& operator=(const scoped_region&) = delete;

 private:
  const char* name_;
};

}  // namespace kairos
#endif /* __cplusplus */

#endif /* KAIROS_USER_H */
